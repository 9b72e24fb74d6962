package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/lib/telemetry/telemetrytest"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-ingest/internal/checkpoint"
	"shindo.dev/svc-ingest/internal/peersync"
	"shindo.dev/svc-ingest/internal/recordwire"
	"shindo.dev/svc-ingest/internal/replay"
)

// restarted is an intake over dir as a restarted ingest wires it: a gate
// with empty windows, a sync with an empty index, a checkpointer; read
// counts the journal records the restore reads back.
type restarted struct {
	in     *intake
	syncer *peersync.Syncer
	cp     *checkpointer
	read   atomic.Int64
}

func restart(t testing.TB, dir string) *restarted {
	t.Helper()
	tp, _ := telemetrytest.Recorder(t)
	in, j := newTestIntake(t, dir, 0, tp)
	in.guard = &checkpoint.Guard{}
	r := &restarted{in: in}
	r.syncer = peersync.New(peersync.Config{Site: "TNN-1", PeerSite: "TYO-1", Gate: in.gate, Journal: j, Guard: in.guard,
		Stations: func() []string { return []string{"S1"} }, LongWindow: 4096, Log: in.log, Metrics: prometheus.NewRegistry()})
	in.indexed = func(station string, seq, index uint64) {
		r.read.Add(1)
		r.syncer.Indexed(station, seq, index)
	}
	r.cp = newCheckpointer(dir, j, in.gate, r.syncer, in.guard, prometheus.NewRegistry(), in.log)
	return r
}

func (r *restarted) send(t *testing.T, from, to uint64) {
	t.Helper()
	for seq := from; seq <= to; seq += 2 {
		r.in.handle([][]byte{sealed(t, seq), sealed(t, seq+1)}, ingestv1.Transport_TRANSPORT_UDP)()
	}
}

// sameAsReadBack checks r's windows and index against a restore that reads
// the whole journal, as a restart without a checkpoint does.
func sameAsReadBack(t *testing.T, dir string, r *restarted) {
	t.Helper()
	os.Rename(filepath.Join(dir, checkpointName), filepath.Join(dir, checkpointName+".aside"))
	defer os.Rename(filepath.Join(dir, checkpointName+".aside"), filepath.Join(dir, checkpointName))
	full := restart(t, dir)
	if err := full.in.rebuild(full.in.log, full.cp); err != nil {
		t.Fatal(err)
	}
	if got, want := r.in.gate.Windows(), full.in.gate.Windows(); !reflect.DeepEqual(got, want) {
		t.Errorf("replay windows from the checkpoint differ from those read back:\n got %+v\nwant %+v", got, want)
	}
	got, _ := r.syncer.Index()
	want, _ := full.syncer.Index()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sync index from the checkpoint differs from the one read back:\n got %v\nwant %v", got, want)
	}
	full.in.journal.Close()
}

// TestRestartReadsOnFromTheCheckpoint: after a crash (no checkpoint at
// shutdown), a restart restores the last checkpoint and reads back only
// the records after it, and ends with the windows and the index a full
// read-back gives; a packet recorded before is still not recorded twice.
func TestRestartReadsOnFromTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	r := restart(t, dir)
	r.send(t, 1, 300)
	if err := r.cp.Save(); err != nil {
		t.Fatal(err)
	}
	r.send(t, 301, 330)
	r.in.journal.Close()

	r = restart(t, dir)
	if err := r.in.rebuild(r.in.log, r.cp); err != nil {
		t.Fatal(err)
	}
	if r.read.Load() != 30 {
		t.Errorf("restart read %d records back, want the 30 after the checkpoint", r.read.Load())
	}
	sameAsReadBack(t, dir, r)
	r.in.handle([][]byte{sealed(t, 5), sealed(t, 320), sealed(t, 331)}, ingestv1.Transport_TRANSPORT_UDP)()
	if n := r.in.journal.Next(); n != 331 {
		t.Fatalf("journal holds %d records after two replays and one new packet, want 331", n)
	}
}

// TestCheckpointNotFittingIsIgnored: a checkpoint that is damaged, taken of
// another journal, of windows of another size, or ahead of the journal is
// not used; the restart reads the journal back whole as before.
func TestCheckpointNotFittingIsIgnored(t *testing.T) {
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		r := restart(t, dir)
		r.send(t, 1, 100)
		if err := r.cp.Save(); err != nil {
			t.Fatal(err)
		}
		r.in.journal.Close()
		return dir
	}
	for name, spoil := range map[string]func(t *testing.T, dir string){
		"damaged": func(t *testing.T, dir string) {
			path := filepath.Join(dir, checkpointName)
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 0x40
			os.WriteFile(path, b, 0o600)
		},
		"another journal": func(t *testing.T, dir string) {
			cp, _ := os.ReadFile(filepath.Join(dir, checkpointName))
			segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
			for _, s := range segs {
				os.Remove(s)
			}
			os.Remove(filepath.Join(dir, checkpointName))
			r := restart(t, dir)
			r.send(t, 1001, 1100) // as many records, other packets
			r.in.journal.Close()
			os.WriteFile(filepath.Join(dir, checkpointName), cp, 0o600)
		},
		"ahead of the journal": func(t *testing.T, dir string) {
			path := filepath.Join(dir, checkpointName)
			b, _ := os.ReadFile(path)
			s, err := checkpoint.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			s.Next += 10
			os.WriteFile(path, checkpoint.Encode(s), 0o600)
		},
		"other window size": func(t *testing.T, dir string) {
			path := filepath.Join(dir, checkpointName)
			b, _ := os.ReadFile(path)
			s, _ := checkpoint.Decode(b)
			s.Words = 32
			for id, w := range s.Windows {
				w.Bits = w.Bits[:32]
				s.Windows[id] = w
			}
			os.WriteFile(path, checkpoint.Encode(s), 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := setup(t)
			spoil(t, dir)
			r := restart(t, dir)
			if err := r.in.rebuild(r.in.log, r.cp); err != nil {
				t.Fatal(err)
			}
			if r.read.Load() != 100 {
				t.Errorf("restart read %d records back, want all 100", r.read.Load())
			}
			sameAsReadBack(t, dir, r)
		})
	}
}

// TestCheckpointWhileRecording: checkpoints taken while batches are being
// recorded hold exactly the records below their journal index (the guard),
// so a restart from any of them agrees with a full read-back.
func TestCheckpointWhileRecording(t *testing.T) {
	dir := t.TempDir()
	r := restart(t, dir)
	var wg sync.WaitGroup
	finished := make(chan struct{})
	for g := range uint64(4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Four uplinks' worth of batches, each its share of every
			// 32 seqs, as a station's packets arrive.
			for base := uint64(1); base <= 8000; base += 32 {
				batch := make([][]byte, 8)
				for k := range batch {
					batch[k] = sealed(t, base+g*8+uint64(k))
				}
				r.in.handle(batch, ingestv1.Transport_TRANSPORT_UDP)()
			}
		}()
	}
	go func() { wg.Wait(); close(finished) }()
	// Checkpoints through the first half; the rest is read back.
	saves := 0
	for r.in.journal.Next() < 2000 {
		if err := r.cp.Save(); err != nil {
			t.Fatal(err)
		}
		saves++
	}
	// And many more snapshots, each checked below against the journal.
	var snaps []checkpoint.State
	for running := true; running; {
		select {
		case <-finished:
			running = false
		default:
			snaps = append(snaps, r.cp.snapshot())
		}
	}
	recorded := r.in.journal.Next()
	var seqs []uint64 // by journal index
	r.in.journal.Scan(0, func(_ uint64, payload []byte) {
		_, seq, _ := recordwire.Peek(payload)
		seqs = append(seqs, seq)
	})
	r.in.journal.Close()
	t.Logf("%d checkpoints and %d snapshots taken while %d packets were recorded", saves, len(snaps), recorded)
	for _, s := range snaps {
		w := s.Windows["S1"]
		for index, seq := range seqs[:s.Next] {
			if w.Top-seq < uint64(64*s.Words) && !replay.Holds(w.Top, wordsToBytes(w.Bits), seq) {
				t.Fatalf("snapshot covering the journal up to %d lacks seq %d, recorded at %d", s.Next, seq, index)
			}
		}
	}

	r = restart(t, dir)
	if err := r.in.rebuild(r.in.log, r.cp); err != nil {
		t.Fatal(err)
	}
	if n := uint64(r.read.Load()); n == 0 || n >= recorded {
		t.Errorf("restart read %d of %d records back, want those after the last checkpoint", r.read.Load(), recorded)
	}
	sameAsReadBack(t, dir, r)
}

// wordsToBytes lays a window's bitmap out as Holdings does.
func wordsToBytes(words []uint64) []byte {
	b := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	return b
}

// BenchmarkRestart: a restarted ingest's restore of the replay windows and
// the sync's index at 1,000 stations, from a journal of 4 million records
// (the read-back's bound), read back whole beside restored from a
// checkpoint taken 40,000 records (10 s of the fleet) before the end. It
// also reports how long a checkpoint holds recording back (quiesce) and
// takes in all (save).
func BenchmarkRestart(b *testing.B) {
	const stations, seqs, tail = 1000, 4000, 40_000
	dir := b.TempDir()
	w := restart(b, dir)
	body := &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{WindowEndMs: 1_764_800_000_000, Intensity: 1.5}}
	batch := make([][]byte, 0, stations)
	for seq := uint64(1); seq <= seqs; seq++ {
		batch = batch[:0]
		for st := range stations {
			id := fmt.Sprintf("S%04d", st)
			p, err := proto.Marshal(&stationv1.Packet{StationId: id, Seq: seq, SentAtMs: 1_764_800_000_000, Body: body})
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, encodeRecord(append(p, make([]byte, 200)...), 1_764_800_000_000, "TNN-1", ingestv1.Transport_TRANSPORT_UDP, nil, seedcode.Codes{}))
		}
		first, err := w.in.journal.Append(context.Background(), batch...)
		if err != nil {
			b.Fatal(err)
		}
		for k, rec := range batch {
			id, s, _ := recordwire.Peek(rec)
			w.in.gate.Record(id, s, 0)
			w.syncer.Indexed(id, s, first+uint64(k))
		}
		if w.in.journal.Next() == stations*seqs-tail {
			if err := w.cp.Save(); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Saved elsewhere: the checkpoint above is the one restored below.
	other := *w.cp
	other.path = filepath.Join(b.TempDir(), checkpointName)
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			other.snapshot()
		}
	})
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			if err := other.Save(); err != nil {
				b.Fatal(err)
			}
		}
		st, _ := os.Stat(other.path)
		b.ReportMetric(float64(st.Size())/1e6, "MB")
	})
	w.in.journal.Close()
	for _, c := range []struct {
		name       string
		checkpoint bool
		read       int64
	}{{"read-back", false, stations * seqs}, {"checkpoint", true, tail}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				r := restart(b, dir)
				cp := r.cp
				if !c.checkpoint {
					cp = nil
				}
				b.StartTimer()
				if err := r.in.rebuild(r.in.log, cp); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if n := r.read.Load(); n != c.read {
					b.Fatalf("read %d records back, want %d", n, c.read)
				}
				r.in.journal.Close()
				b.StartTimer()
			}
		})
	}
}
