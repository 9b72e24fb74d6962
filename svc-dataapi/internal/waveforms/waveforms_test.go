package waveforms

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

// TestFileName: the download's name comes from the archive's SEED codes,
// and codes that could break out of the Content-Disposition header (or are
// simply not SEED codes) are refused rather than sent.
func TestFileName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		net, sta, loc string
		want          string
	}{
		{"SH", "HUA01", "00", "SH.HUA01.00.20260101T000000.mseed"},
		{"S", "A", "", "S.A..20260101T000000.mseed"},
		{"", "HUA01", "00", ""},
		{"SH", "", "00", ""},
		{"SH", "HUA012", "00", ""},
		{"SHX", "HUA01", "00", ""},
		{"SH", "HUA01", "000", ""},
		{"SH", `A"B`, "00", ""},
		{"sh", "HUA01", "00", ""},
		{"SH", "HU\r\n", "00", ""},
	} {
		got, ok := fileName(&waveformv1.ExportResponse{NetworkCode: tc.net, StationCode: tc.sta, LocationCode: tc.loc}, 1767225600000)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%q %q %q: %q %v, want %q", tc.net, tc.sta, tc.loc, got, ok, tc.want)
		}
	}
}

// endless is an archive whose export of any window never ends: part after
// part of 64 KiB, until the request's context ends.
type endless struct {
	waveformv1.WaveformServiceClient
	ended chan struct{} // closed when the export's context ends
}

func (a *endless) Export(ctx context.Context, _ *waveformv1.ExportRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[waveformv1.ExportResponse], error) {
	go func() {
		<-ctx.Done()
		close(a.ended)
	}()
	return &endlessStream{ctx: ctx}, nil
}

type endlessStream struct {
	grpc.ClientStream
	ctx context.Context
}

func (s *endlessStream) Recv() (*waveformv1.ExportResponse, error) {
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	return &waveformv1.ExportResponse{NetworkCode: "SH", StationCode: "HUA01", Data: make([]byte, 64<<10)}, nil
}

// TestExportClientThatStopsReading: a client that stops reading a
// miniSEED download is cut within the write bound, and the archive's
// export with it, where a write without a deadline held both for as long
// as the client's kernel answered with a closed window.
func TestExportClientThatStopsReading(t *testing.T) {
	t.Parallel()
	archive := &endless{ended: make(chan struct{})}
	// Handler's route, with the bound shortened for the test.
	h := &handler{client: archive, log: slog.New(slog.DiscardHandler), writeStall: 300 * time.Millisecond}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/waveforms/{station_id}/mseed", h.export)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A client with a small receive buffer that reads the head and stops.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/waveforms/HUA01/mseed?start_ms=0&end_ms=60000 HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-archive.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the export went on with its client not reading")
	}
}

// pausing is an archive whose export is one part, then, after a pause,
// the end.
type pausing struct {
	waveformv1.WaveformServiceClient
}

func (pausing) Export(ctx context.Context, _ *waveformv1.ExportRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[waveformv1.ExportResponse], error) {
	return &pausingStream{}, nil
}

type pausingStream struct {
	grpc.ClientStream
	sent bool
}

func (s *pausingStream) Recv() (*waveformv1.ExportResponse, error) {
	if !s.sent {
		s.sent = true
		return &waveformv1.ExportResponse{NetworkCode: "SH", StationCode: "HUA01", Data: []byte("records")}, nil
	}
	//nolint:forbidigo // the archive's pause is the case under test
	time.Sleep(600 * time.Millisecond)
	return nil, io.EOF
}

// TestExportPausingBeforeItsEnd: the write bound is per part, not for the
// whole download: an archive that pauses longer than it before the end
// still has the end reach the client.
func TestExportPausingBeforeItsEnd(t *testing.T) {
	t.Parallel()
	h := &handler{client: pausing{}, log: slog.New(slog.DiscardHandler), writeStall: 200 * time.Millisecond}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/waveforms/{station_id}/mseed", h.export)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/waveforms/HUA01/mseed?start_ms=0&end_ms=60000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, err := io.ReadAll(resp.Body); err != nil || string(body) != "records" {
		t.Fatalf("%q, %v", body, err)
	}
}
