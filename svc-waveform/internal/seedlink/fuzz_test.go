package seedlink

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"slices"
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

// FuzzLines: the command lines of a TCP client's bytes and of a WebSocket
// message never hold CR or LF, are never blank, keep the bytes between
// the line ends in order, and a TCP line is at most MaxLine bytes — a
// longer run ends the connection instead.
func FuzzLines(f *testing.F) {
	for _, seed := range []string{
		"HELLO\r\nSTATION 00001 SH\nSELECT 00BNZ.D\r\rDATA\nEND\n",
		"\n\n\r\r",
		"INFO ID",
		strings.Repeat("x", MaxLine) + "\n" + strings.Repeat("y", MaxLine+1),
		"SLPROTO 4.0\r\n   \r\nBYE\r\n",
		"\x00\xff\xfe\n\x80",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// What the lines must be: the runs between CR and LF, in order.
		runs := strings.FieldsFunc(string(in), func(r rune) bool { return r == '\r' || r == '\n' })
		// TCP: byte by byte from the stream; a last run with no line end
		// is no line (the stream ended in it), unless it is already too
		// long.
		lines := runs
		if n := len(in); n > 0 && in[n-1] != '\r' && in[n-1] != '\n' {
			lines = runs[:len(runs)-1]
		}
		br := bufio.NewReader(bytes.NewReader(in))
		for i := 0; ; i++ {
			line, err := nextLine(br)
			if errors.Is(err, errLineTooLong) {
				if i >= len(runs) || len(runs[i]) <= MaxLine {
					t.Fatalf("line %d: too long, but the run is %q", i, runs[i:])
				}
				break
			}
			if err != nil {
				if i != len(lines) || len(runs) > len(lines) && len(runs[i]) > MaxLine {
					t.Fatalf("ended after %d lines of %d (%v)", i, len(lines), err)
				}
				break
			}
			if i >= len(lines) || line != lines[i] || len(line) > MaxLine {
				t.Fatalf("line %d: %q, want %q", i, line, lines[i:])
			}
		}
		// WebSocket: one message's commands, blank ones left out.
		var want []string
		for _, r := range runs {
			if strings.TrimSpace(r) != "" {
				want = append(want, r)
			}
		}
		if got := commands(in); !slices.Equal(got, want) {
			t.Fatalf("commands %q, want %q", got, want)
		}
	})
}
