package waveform

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"shindo.dev/devkit/freeaddr"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
	"shindo.dev/seismo/mseed"
)

// TestSeedLinkResumeByTime: svc-waveform, as its own process over a real
// archive, holds eleven minutes of a station; a SeedLink 4 client asking
// for everything from ten minutes ago (DATA ALL start, as SeedLink 4's
// time request) gets the archive's part (eight minutes and more, older
// than the two-minute ring), then the ring's, then frames that arrive
// while it reads: each sample once, none missing, each the station's.
func TestSeedLinkResumeByTime(t *testing.T) {
	t.Parallel()
	bin := waveformBinary(t)
	sl := freeaddr.TCP(t)
	c := startChild(t, bin, t.TempDir(), "-seedlink-addr", sl, "-seedlink-window", "2m")
	conn, err := grpc.NewClient(c.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := waveformv1.NewWaveformServiceClient(conn)

	const id = "S00001"
	now := time.Now().UnixMilli() / 500 * 500
	first := now - 11*60_000
	record := func(ms int64) *ingestv1.Record {
		r := sensorRecord(id, ms, 25)
		r.NetworkCode, r.StationCode, r.LocationCode = "SH", "00001", "00"
		return r
	}
	var batch uint64
	ingest := func(from, to int64) error { // frames [from, to), acked
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ing, err := client.Ingest(ctx)
		if err != nil {
			return err
		}
		for ms := from; ms < to; ms += 500 {
			batch++
			if err := ing.Send(&waveformv1.IngestRequest{BatchId: batch, Records: []*ingestv1.Record{record(ms)}}); err != nil {
				return err
			}
		}
		for {
			ack, err := ing.Recv()
			if err != nil {
				return fmt.Errorf("ack: %w\n%s", err, c.stderr)
			}
			if ack.GetAckedBatchId() == batch {
				return ing.CloseSend()
			}
		}
	}
	if err := ingest(first, now); err != nil {
		t.Fatal(err)
	}

	from := now - 10*60_000
	sc, err := net.Dial("tcp", sl)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	_ = sc.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(sc)
	for _, cmd := range []string{"SLPROTO 4.0", "STATION SH_00001", "SELECT 00_B_N_Z",
		"DATA ALL " + time.UnixMilli(from).UTC().Format("2006-01-02T15:04:05.000Z")} {
		fmt.Fprintf(sc, "%s\r\n", cmd)
		if l, err := r.ReadString('\n'); err != nil || l != "OK\r\n" {
			t.Fatalf("%s: %q %v", cmd, l, err)
		}
	}
	fmt.Fprintf(sc, "END\r\n")

	// Live frames while the client reads the past.
	const live = 20
	liveDone := make(chan error, 1)
	go func() { liveDone <- ingest(now, now+live*500) }()

	want := (now + live*500 - from) / 20
	var got []int32
	var last uint64
	next := from
	for int64(len(got)) < want {
		h := make([]byte, 17)
		if _, err := io.ReadFull(r, h); err != nil {
			t.Fatalf("after %d of %d samples: %v", len(got), want, err)
		}
		seq := binary.LittleEndian.Uint64(h[8:])
		if _, err := io.ReadFull(r, make([]byte, h[16])); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, binary.LittleEndian.Uint32(h[4:]))
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatal(err)
		}
		if seq <= last {
			t.Fatalf("record %d after %d", seq, last)
		}
		last = seq
		rec, err := mseed.Parse(payload)
		if err != nil {
			t.Fatal(err)
		}
		if ms := rec.Start.UnixMilli(); ms != next {
			t.Fatalf("after %d samples: a record from %s, want %s: a gap or a repeat", len(got),
				rec.Start.Format(time.TimeOnly+".000"), time.UnixMilli(next).UTC().Format(time.TimeOnly+".000"))
		}
		next += int64(len(rec.Ints)) * 20
		got = append(got, rec.Ints...)
	}
	if err := <-liveDone; err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if w := count(id, 0, from+int64(i)*20); v != w {
			t.Fatalf("sample %d (%s): %d, want %d", i, time.UnixMilli(from+int64(i)*20).UTC().Format(time.TimeOnly+".000"), v, w)
		}
	}
	if !slices.ContainsFunc(got, func(v int32) bool { return v != 0 }) {
		t.Fatal("all samples zero")
	}
}
