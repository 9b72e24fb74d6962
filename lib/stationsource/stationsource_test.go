package stationsource_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/devkit/poll"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/stationsource"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// open opens c as a service does and keeps the registry fresh until the
// test ends.
func open(t *testing.T, c stationsource.Config) *stationsource.Opened {
	t.Helper()
	o, err := stationsource.Open(context.Background(), c, 10*time.Second, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Source.Run(ctx, c.RegistryInterval) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		o.Close()
	})
	return o
}

// A service's registry learns a station's seq reset without a restart:
// with an hour between full reloads, through the change notification.
func TestDatabaseRegistryLearnsSeqReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := open(t, stationsource.Config{DatabaseURL: pgtest.Shared(t).NewDatabase(t), RegistryInterval: time.Hour})
	store := metadb.NewStore(o.Pool) // migrated by Open
	if _, err := store.CreateStation(ctx, metadb.NewStation{ID: "HL-01", Lat: 23.97, Lon: 121.6}); err != nil {
		t.Fatal(err)
	}
	// Seeing the new station proves the listener is up, so what follows
	// arrives by notification.
	poll.Until(t, 15*time.Second, "HL-01 in the registry", func() bool { _, ok := o.Source.Lookup("HL-01"); return ok })
	if st, _ := o.Source.Lookup("HL-01"); st.SeqResetMs != 0 {
		t.Fatalf("new station reset at %d", st.SeqResetMs)
	}

	for range 2 { // a second reset is seen as one too
		reset, err := store.ResetStationSeq(ctx, "HL-01", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 15*time.Second, fmt.Sprintf("seq_reset_ms %d in the registry", reset.SeqResetMs), func() bool {
			st, _ := o.Source.Lookup("HL-01")
			return st.SeqResetMs == reset.SeqResetMs
		})
	}
}

func TestFileRegistryCarriesSeqReset(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stations.json")
	doc := `[{"id":"HL-01","lat":23.97,"lon":121.6,"key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f","seq_reset_ms":1712102289000}]`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	o := open(t, stationsource.Config{Registry: path, RegistryInterval: time.Hour})
	if st, ok := o.Source.Lookup("HL-01"); !ok || st.SeqResetMs != 1712102289000 {
		t.Fatalf("HL-01 = %+v", st)
	}
}
