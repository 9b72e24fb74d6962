package seedlink

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scriptTransport plays a client's command lines and keeps the replies.
type scriptTransport struct {
	lines []string

	mu      sync.Mutex
	written int
}

func (t *scriptTransport) readLine() (string, error) {
	if len(t.lines) == 0 {
		return "", io.EOF
	}
	l := t.lines[0]
	t.lines = t.lines[1:]
	if len(l) > MaxLine {
		return "", errLineTooLong
	}
	return l, nil
}

func (t *scriptTransport) write(parts ...[]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range parts {
		t.written += len(p)
	}
	return nil
}

func (t *scriptTransport) writePackets(parts [][]byte) error { return t.write(parts...) }
func (t *scriptTransport) beginStream()                      {}

// FuzzSession: any sequence of command lines, in either protocol, ends in
// replies, data or a clean end of the session; never a panic or a stall.
// The seeds are the handshakes of seisplotjs (src/seedlink.ts and
// src/seedlink4.ts), slinktool and ObsPy's SeedLink clients.
func FuzzSession(f *testing.F) {
	for _, seed := range []string{
		"HELLO\nSTATION 00001 SH\nSELECT 00BNZ.D\nDATA\nEND",
		"HELLO\nSLPROTO 4.0\nUSERAGENT seisplotjs/3.2.2 (seisplotjs/3.2.2)\nSTATION SH_00001\nSELECT 00_B_N_Z\nDATA\nEND",
		"SLPROTO 4.0\nSTATION SH_*\nSELECT *\nDATA ALL 2026-12-02T10:00:00Z 2026-12-02T11:00:00Z\nEND",
		"CAPABILITIES EXTREPLY\nSTATION 00001 SH\nTIME 2026,12,02,10,00,00\nEND",
		"BATCH\nSTATION 0000? SH\nSELECT !BNZ\nFETCH 0000A0\nENDFETCH",
		"INFO ID\nINFO STREAMS\nSLPROTO 4.0\nINFO STATIONS SH_* 00_B_N_?\nINFO CONNECTIONS\nBYE",
		"DATA 000040 2026,12,02,10,00,00",
		"SLPROTO 4.0\nSELECT 00_B_N_Z:3\nSELECT x:native\nDATA 18446744073709551615\nEND",
		"STATION [ SH\nSELECT [\nINFO STATIONS [",
		// ObsPy's EasySeedLinkClient: capabilities first, and a resume
		// in Python's hex().
		"HELLO\nINFO CAPABILITIES\nSTATION  00002 SH\nSELECT MXA\nDATA 0xdf5ea\nEND",
	} {
		f.Add(seed)
	}
	s := New(Options{
		Window: time.Minute, ClientBuffer: 64, Negotiation: time.Second, WriteTimeout: time.Second, Site: "TNN-1",
		Names: func(id string) (StationKey, bool) { return StationKey{"SH", strings.TrimPrefix(id, "S")}, true },
	}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	for seq := uint64(1); seq <= 5; seq++ {
		s.Publish(sensorFrame(seq))
		s.Publish(Frame{Station: "S00001", FirstMs: base + 500*int64(seq), Values: [3]float32{1, 2, 3}})
	}
	stop := make(chan struct{})
	f.Fuzz(func(t *testing.T, script string) {
		tr := &scriptTransport{lines: strings.Split(script, "\n")}
		err := newSession(s, tr).run(stop)
		if err == nil {
			t.Fatal("a session ended without a reason")
		}
	})
}
