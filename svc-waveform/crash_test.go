package waveform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"shindo.dev/devkit/freeaddr"
	"shindo.dev/devkit/poll"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/seismo/mseed"
)

// waveformBinary returns shindo-waveform from $SHINDO_BIN, or builds it.
func waveformBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("SHINDO_BIN"); dir != "" {
		p := filepath.Join(dir, "shindo-waveform")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("SHINDO_BIN: %v", err)
		}
		return p
	}
	p := filepath.Join(t.TempDir(), "shindo-waveform")
	out, err := exec.Command("go", "build", "-o", p, "./cmd/shindo-waveform").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return p
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// child is svc-waveform running as its own process.
type child struct {
	cmd    *exec.Cmd
	grpc   string
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

// startChild starts shindo-waveform on dataDir; extra flags come last, so
// they override the defaults here.
func startChild(t *testing.T, bin, dataDir string, extra ...string) *child {
	t.Helper()
	c := &child{grpc: freeaddr.TCP(t), stderr: &syncBuffer{}, exited: make(chan struct{})}
	admin := freeaddr.TCP(t)
	c.cmd = exec.Command(bin, append([]string{"-data-dir", dataDir, "-seedlink-addr", "127.0.0.1:0", "-grpc-addr", c.grpc, "-admin-addr", admin,
		"-log-level", "warn", "-shutdown-timeout", "5s"}, extra...)...)
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.exited
	})
	ready := poll.Within(20*time.Second, func() bool {
		select {
		case <-c.exited:
			return true // reported below
		default:
		}
		res, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	select {
	case <-c.exited:
		t.Fatalf("shindo-waveform exited: %v\n%s", c.err, c.stderr)
	default:
	}
	if !ready {
		t.Fatalf("shindo-waveform not ready\n%s", c.stderr)
	}
	return c
}

// TestCrashSafety runs svc-waveform as a separate process, streams batches
// over the real Ingest stream as svc-ingest does (a window of unacked
// batches, resent after a reconnect), kills it with SIGKILL at random
// points while batches are in flight, restarts it, and checks that every
// acked batch is there, then that everything is stored exactly once and a
// clean stop leaves no WAL.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	bin := waveformBinary(t)
	dataDir := t.TempDir()
	const (
		stations = 8
		batches  = 400
		window   = 32
		kills    = 6
	)
	ids := make([]string, stations)
	for i := range ids {
		ids[i] = fmt.Sprintf("SIM%05d", i+1)
	}
	start := time.Now().Add(-30*time.Minute).UnixMilli() / 500 * 500
	frameTime := func(b uint64) int64 { return start + 500*int64(b-1) }
	batch := func(b uint64) *waveformv1.IngestRequest {
		req := &waveformv1.IngestRequest{BatchId: b}
		for _, id := range ids {
			req.Records = append(req.Records, sensorRecord(id, frameTime(b), 25), intensityRecord(id, frameTime(b)+500))
		}
		return req
	}
	r := rand.New(rand.NewPCG(5, 6))
	var acked, next uint64 = 0, 1

	// session streams until killAfter acks arrived (then SIGKILLs the
	// process with batches in flight) or, with killAfter 0, until all are
	// acked.
	session := func(c *child, killAfter int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		stream, err := waveformv1.NewWaveformServiceClient(conn).Ingest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Unacked batches first, as svc-ingest resends them.
		sent := acked
		acks := 0
		for acked < batches {
			for sent < min(acked+window, batches) {
				sent++
				if err := stream.Send(batch(sent)); err != nil {
					t.Fatalf("send: %v\n%s", err, c.stderr)
				}
				next = max(next, sent+1)
			}
			resp, err := stream.Recv()
			if err != nil {
				t.Fatalf("ack: %v\n%s", err, c.stderr)
			}
			if id := resp.GetAckedBatchId(); id > acked {
				acked = id
			}
			acks++
			if killAfter > 0 && acks == killAfter {
				c.cmd.Process.Signal(syscall.SIGKILL)
				<-c.exited
				return
			}
		}
	}
	// verify checks that batches 1..upTo are all there, and none past
	// sentTo.
	verify := func(c *child, upTo, sentTo uint64) {
		t.Helper()
		conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := waveformv1.NewWaveformServiceClient(conn)
		for _, id := range ids {
			resp, err := client.Query(context.Background(), &waveformv1.QueryRequest{
				StationId: id, StartMs: start, EndMs: frameTime(batches + 2), WithIntensity: true,
			})
			if upTo == 0 && err != nil {
				continue
			}
			if err != nil {
				t.Fatalf("query %s: %v", id, err)
			}
			have := map[int64]int{}
			for _, ch := range resp.GetChunks() {
				for i, v := range ch.GetUd() {
					ms := ch.GetFirstSampleMs() + 20*int64(i)
					have[ms]++
					if v != count(id, 0, ms) || ch.GetNs()[i] != count(id, 1, ms) || ch.GetEw()[i] != count(id, 2, ms) {
						t.Fatalf("%s at %d: wrong sample", id, ms)
					}
				}
			}
			for b := uint64(1); b <= upTo; b++ {
				for i := range int64(25) {
					if have[frameTime(b)+20*i] != 1 {
						t.Fatalf("%s: acked batch %d sample %d seen %d times", id, b, i, have[frameTime(b)+20*i])
					}
				}
			}
			for ms := range have {
				if ms >= frameTime(sentTo+1) {
					t.Fatalf("%s: sample at %d was never sent", id, ms)
				}
			}
			ints := map[int64]bool{}
			for _, in := range resp.GetIntensity() {
				ints[in.GetWindowEndMs()] = true
			}
			for b := uint64(1); b <= upTo; b++ {
				if !ints[frameTime(b)+500] {
					t.Fatalf("%s: acked batch %d has no intensity frame", id, b)
				}
			}
		}
	}

	for k := range kills {
		c := startChild(t, bin, dataDir)
		verify(c, acked, next-1)
		session(c, 3+r.IntN(25))
		t.Logf("kill %d: %d batches acked, %d sent", k+1, acked, next-1)
		if acked >= batches {
			t.Fatal("all batches acked before the last kill: make the run longer")
		}
	}
	c := startChild(t, bin, dataDir)
	verify(c, acked, next-1)
	session(c, 0)
	verify(c, batches, batches)

	// A clean stop writes everything as records and leaves no WAL.
	c.cmd.Process.Signal(syscall.SIGTERM)
	<-c.exited
	if c.err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", c.err, c.stderr)
	}
	if segs, _ := filepath.Glob(filepath.Join(dataDir, "wal", "*.log")); len(segs) != 0 {
		t.Errorf("WAL left after a clean stop: %v", segs)
	}
	counts := checkDisk(t, filepath.Join(dataDir, "sds"))
	for _, ch := range []string{"BNZ", "BNN", "BNE"} {
		if counts[ch] != stations*batches*25 {
			t.Errorf("%s: %d samples on disk, want %d", ch, counts[ch], stations*batches*25)
		}
	}
	if counts["MXI"] != stations*batches {
		t.Errorf("MXI: %d samples on disk, want %d", counts["MXI"], stations*batches)
	}
}

// checkDisk reads every record in an SDS tree, fails if any two records of
// a channel overlap, and returns the samples per channel code.
func checkDisk(t *testing.T, root string) map[string]int {
	t.Helper()
	type span struct{ lo, hi int64 }
	spans := map[string][]span{}
	counts := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rd := mseed.NewReader(f)
		for {
			rec, err := rd.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			p := rec.SamplePeriod().Milliseconds()
			lo := rec.Start.UnixMilli() / p
			spans[rec.SourceName()] = append(spans[rec.SourceName()], span{lo, lo + int64(rec.NumSamples)})
			counts[rec.Channel] += rec.NumSamples
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, ss := range spans {
		sort.Slice(ss, func(i, j int) bool { return ss[i].lo < ss[j].lo })
		for i := 1; i < len(ss); i++ {
			if ss[i].lo < ss[i-1].hi {
				t.Fatalf("%s: records %v and %v overlap: stored twice", name, ss[i-1], ss[i])
			}
		}
	}
	return counts
}
