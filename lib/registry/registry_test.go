package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
	"shindo.dev/seismo/seedcode"
)

const key32 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, wantErr string
	}{
		{"ok", `[{"id":"B","key_id":1,"key_hex":"` + key32 + `","lat":23.9,"lon":121.6,"code":970},{"id":"A","key_id":2,"key_hex":"` + key32 + `"}]`, ""},
		{"not json", `{`, "decode"},
		{"unknown field", `[{"id":"A","key_hex":"` + key32 + `","colour":"red"}]`, "unknown field"},
		{"missing id", `[{"key_hex":"` + key32 + `"}]`, "missing id"},
		{"duplicate", `[{"id":"A","key_hex":"` + key32 + `"},{"id":"A","key_hex":"` + key32 + `"}]`, "listed twice"},
		{"short key", `[{"id":"A","key_hex":"0011"}]`, "16 to 64 bytes"},
		{"bad hex", `[{"id":"A","key_hex":"zz` + key32[2:] + `"}]`, "16 to 64 bytes"},
		{"bad position", `[{"id":"A","key_hex":"` + key32 + `","lat":91}]`, "out of range"},
		{"null entry", `[null]`, "missing id"},
		{"bad seed", `[{"id":"A","key_hex":"` + key32 + `","seed":{"net":"SHX","sta":"A","loc":""}}]`, "network code"},
		{"seed twice", `[{"id":"A","key_hex":"` + key32 + `","seed":{"net":"SH","sta":"X","loc":""}},{"id":"B","key_hex":"` + key32 + `","seed":{"net":"SH","sta":"X","loc":"10"}}]`, "both named SH.X"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, err := Parse([]byte(tt.doc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.Len() != 2 || set.All()[0].ID != "A" {
				t.Fatalf("set not ordered: %v", set.All())
			}
			b, _ := set.Lookup("B")
			if k, ok := b.Key(1); !ok || len(k) != 32 {
				t.Fatal("key 1 of B not found")
			}
			if _, ok := b.Key(2); ok {
				t.Fatal("key 2 of B found")
			}
			if !b.InService() {
				t.Fatal("station without active flag not in service")
			}
		})
	}
}

func TestFileReloads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stations.json")
	write := func(doc string) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(`[{"id":"A","key_hex":"` + key32 + `"}]`)
	f, err := Open(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx, 10*time.Millisecond)

	write(`not json at all, and longer than before`)
	write(`[{"id":"A","key_hex":"` + key32 + `"},{"id":"B","key_hex":"` + key32 + `"}]`)
	poll.Until(t, 5*time.Second, "the registry reloaded", func() bool { return f.Current().Len() == 2 })
	if _, ok := f.Lookup("B"); !ok {
		t.Fatal("B missing after reload")
	}
}

func TestOpenMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Open(filepath.Join(t.TempDir(), "nope.json"), slog.Default())
	if err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`[{"id":"A","key_id":1,"key_hex":"` + key32 + `","lat":23.9,"lon":121.6,"code":970}]`))
	f.Add([]byte(`[{"id":"A","key_id":1,"key_hex":"` + key32 + `","seq_reset_ms":1712102289000}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"id":"","key_hex":""}]`))
	f.Add([]byte(`[{"id":"A","key_hex":"` + key32 + `","seed":{"net":"TW","sta":"A","loc":""}},{"id":"TW.A","key_hex":"` + key32 + `"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := Parse(b)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, s := range set.All() {
			if err := s.SEED.Check(); err != nil || names[s.SEED.Key()] {
				t.Fatalf("station %q named %v (%v), or a name given twice", s.ID, s.SEED, err)
			}
			names[s.SEED.Key()] = true
			if _, ok := s.Key(s.KeyID); !ok {
				t.Fatalf("station %q has no usable key", s.ID)
			}
			if err := CheckSeqReset(s.SeqResetMs, time.Now()); err != nil {
				t.Fatalf("station %q accepted with %v", s.ID, err)
			}
		}
	})
}

func TestKeyRotation(t *testing.T) {
	t.Parallel()
	const oldHex = "ffeeddccbbaa99887766554433221100"
	set, err := Parse([]byte(`[{"id":"A","key_id":2,"key_hex":"` + key32 + `",
		"previous_keys":[{"key_id":1,"key_hex":"` + oldHex + `","not_after":"2030-01-01T00:00:00Z"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := set.Lookup("A")
	before := time.Date(2029, 12, 31, 23, 59, 0, 0, time.UTC)
	after := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if k, ok := a.KeyAt(2, after); !ok || len(k) != 32 {
		t.Fatal("current key refused")
	}
	if k, ok := a.KeyAt(1, before); !ok || len(k) != 16 {
		t.Fatal("previous key refused inside its overlap")
	}
	if _, ok := a.KeyAt(1, after); ok {
		t.Fatal("previous key accepted after not_after")
	}
	if _, ok := a.KeyAt(3, before); ok {
		t.Fatal("unknown key accepted")
	}
	if string(a.CurrentKey()) != string(mustKey(a, 2)) {
		t.Fatal("CurrentKey is not key 2")
	}
	for _, bad := range []string{
		`[{"id":"A","key_id":1,"key_hex":"` + key32 + `","previous_keys":[{"key_id":1,"key_hex":"` + oldHex + `","not_after":"2030-01-01T00:00:00Z"}]}]`,
		`[{"id":"A","key_id":2,"key_hex":"` + key32 + `","previous_keys":[{"key_id":1,"key_hex":"00","not_after":"2030-01-01T00:00:00Z"}]}]`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func mustKey(s *Station, id uint32) []byte {
	k, _ := s.Key(id)
	return k
}

func TestSignerFollowsKeyRules(t *testing.T) {
	t.Parallel()
	set, err := Parse([]byte(`[{"id":"A","key_id":2,"key_hex":"` + key32 + `",
		"previous_keys":[{"key_id":1,"key_hex":"ffeeddccbbaa99887766554433221100","not_after":"2000-01-01T00:00:00Z"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := set.Lookup("A")
	if _, ok := a.Signer(2); !ok {
		t.Fatal("no signer for the current key")
	}
	if _, ok := a.Signer(1); ok {
		t.Fatal("signer for an expired key")
	}
}

func TestSeqReset(t *testing.T) {
	t.Parallel()
	now := time.Now()
	station := func(ms int64) string {
		return fmt.Sprintf(`[{"id":"A","key_hex":"%s","seq_reset_ms":%d}]`, key32, ms)
	}
	tests := []struct {
		name string
		ms   int64
		ok   bool
	}{
		{"never reset", 0, true},
		{"start of 2020", MinSeqResetMs, true},
		{"now", now.UnixMilli(), true},
		{"an hour ahead (clock skew)", now.Add(time.Hour).UnixMilli(), true},
		{"just before 2020", MinSeqResetMs - 1, false},
		{"seconds, not milliseconds", now.Unix(), false},
		{"negative", -1, false},
		{"two days ahead", now.Add(48 * time.Hour).UnixMilli(), false},
		{"far future", 1 << 62, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set, err := Parse([]byte(station(tt.ms)))
			if !tt.ok {
				if err == nil || !strings.Contains(err.Error(), "seq_reset_ms") {
					t.Fatalf("accepted seq_reset_ms %d (err %v)", tt.ms, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := set.Lookup("A"); a.SeqResetMs != tt.ms {
				t.Fatalf("SeqResetMs = %d, want %d", a.SeqResetMs, tt.ms)
			}
		})
	}
}

// The registry file carries seq_reset_ms both ways, and leaves it out for
// a station never reset, so files written before it existed read the same.
func TestSeqResetInFileFormat(t *testing.T) {
	t.Parallel()
	reset := time.Date(2025, 3, 4, 5, 6, 7, 890_000_000, time.UTC).UnixMilli()
	set, err := NewSet([]*Station{
		{ID: "A", KeyID: 1, KeyHex: key32, SeqResetMs: reset},
		{ID: "B", KeyID: 1, KeyHex: key32},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(set.All())
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"seq_reset_ms":%d`, reset); strings.Count(string(b), `"seq_reset_ms"`) != 1 || !strings.Contains(string(b), want) {
		t.Fatalf("encoded %s, want %s on A only", b, want)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := back.Lookup("A")
	bb, _ := back.Lookup("B")
	if a.SeqResetMs != reset || bb.SeqResetMs != 0 {
		t.Fatalf("read back: A %d, B %d", a.SeqResetMs, bb.SeqResetMs)
	}
}

// TestSEEDCodes: a file's stations keep the codes it gives them, and the
// others get seedcode.Station's after those, in id order whatever the
// file's order.
func TestSEEDCodes(t *testing.T) {
	t.Parallel()
	st := func(id, seed string) string {
		s := `{"id":"` + id + `","key_hex":"` + key32 + `"`
		if seed != "" {
			s += `,"seed":` + seed
		}
		return s + "}"
	}
	docs := []string{
		`[` + st("SIM00002", "") + `,` + st("TST00002", "") + `,` + st("HUA", `{"net":"TW","sta":"00002","loc":""}`) + `,` + st("X-00001", `{"net":"SH","sta":"00002","loc":"00"}`) + `]`,
		`[` + st("X-00001", `{"net":"SH","sta":"00002","loc":"00"}`) + `,` + st("TST00002", "") + `,` + st("HUA", `{"net":"TW","sta":"00002","loc":""}`) + `,` + st("SIM00002", "") + `]`,
	}
	var first map[string]string
	for i, doc := range docs {
		set, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range set.All() {
			got[s.ID] = s.SEED.String()
		}
		if got["HUA"] != "TW.00002." || got["X-00001"] != "SH.00002.00" {
			t.Fatalf("doc %d: given codes not kept: %v", i, got)
		}
		// 00002 is taken in SH: both defaults are hashed, SIM before TST.
		taken := map[string]bool{"00002": true}
		for _, id := range []string{"SIM00002", "TST00002"} {
			c := seedcode.Station(id, func(c string) bool { return taken[c] })
			taken[c] = true
			if got[id] != "SH."+c+".00" {
				t.Errorf("doc %d: %s is %s, want SH.%s.00", i, id, got[id], c)
			}
		}
		if first == nil {
			first = got
		} else if fmt.Sprint(got) != fmt.Sprint(first) {
			t.Errorf("the order of the file changed the codes: %v, then %v", first, got)
		}
	}
}
