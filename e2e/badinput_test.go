package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDevBadInput: bad flags, bad environment, a busy port and a missing
// binary each give one clear error and a non-zero exit, without hanging.
func TestDevBadInput(t *testing.T) {
	bin := binDir(t)
	shindo := filepath.Join(bin, "shindo")

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	// The edge's HTTP port is base+200 in the port plan.
	busyBase := fmt.Sprint(busyPort - 200)

	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		want     string
	}{
		{"unknown command", nil, []string{"devv"}, 2, `unknown command "devv"`},
		{"unknown flag", nil, []string{"dev", "-nope"}, 2, "flag provided but not defined: -nope"},
		{"bad count", nil, []string{"dev", "-stations", "0"}, 2, "stations must be between 1 and 100000"},
		{"not a number", nil, []string{"dev", "-stations", "many"}, 2, `"many" is not an integer`},
		{"bad env", []string{"SHINDO_DEV_SIMULATE=perhaps"}, []string{"dev"}, 2, "SHINDO_DEV_SIMULATE"},
		{"bad host", nil, []string{"dev", "-host", "localhost:1"}, 2, "is not an IP address"},
		{"missing binary", nil, []string{"dev", "-bin-dir", t.TempDir()}, 1, "missing binary"},
		{"busy port", nil, []string{"dev", "-dir", t.TempDir(), "-port-base", busyBase}, 1, fmt.Sprintf("port %d (TPE-1 edge HTTP) is not free", busyPort)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, tt.env, shindo, tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.want)
			}
		})
	}
}

// TestServiceBadInput: every service binary answers a bad flag, an invalid
// value, a missing file and a busy port with one error line.
func TestServiceBadInput(t *testing.T) {
	bin := binDir(t)
	registry := filepath.Join(t.TempDir(), "stations.json")
	writeFile(t, registry, `[{"id":"S1","key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f"}]`)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dead := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	free := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }

	tests := []struct {
		name     string
		bin      string
		args     []string
		wantCode int
		want     string
	}{
		{"ingest unknown flag", "shindo-ingest", []string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"rts bad duration", "shindo-rts", []string{"-registry", registry, "-tick-max-delay", "soon"}, 2, `"soon" is not a duration`},
		{"waveform bad address", "shindo-waveform", []string{"-grpc-addr", "nowhere"}, 2, `grpc-addr "nowhere": want host:port`},
		{"dataapi peers without its own ingest", "shindo-dataapi", []string{"-registry", registry, "-peer-ingest", "127.0.0.1:1"}, 2, "peer-ingest: the other cores' links join this core's; give -ingest too"},
		{"dataapi bad peer address", "shindo-dataapi", []string{"-registry", registry, "-ingest", "127.0.0.1:1", "-peer-ingest", "tyo1"}, 2, `ingest address "tyo1": want host:port`},
		{"dataapi waveform as a URL", "shindo-dataapi", []string{"-registry", registry, "-waveform", "http://127.0.0.1:7301"}, 2, `waveform "http://127.0.0.1:7301": want host:port`},
		{"dataapi old waveform-api flag", "shindo-dataapi", []string{"-registry", registry, "-waveform-api", "http://127.0.0.1:7301"}, 2, "flag provided but not defined: -waveform-api"},
		{"waveform has no HTTP listener", "shindo-waveform", []string{"-data-dir", t.TempDir(), "-http-addr", free()}, 2, "flag provided but not defined: -http-addr"},
		{"dataapi reads without writes", "shindo-dataapi", []string{"-registry", registry, "-read-database-url", "postgres://u@127.0.0.1:5432/db"}, 2, "read-database-url: reads of the metadata database; give -database-url"},
		{"dataapi bad read URL", "shindo-dataapi", []string{"-database-url", "postgres://u@127.0.0.1:5432/db", "-read-database-url", "postgres://u@[::1/db"}, 2, "read-database-url: want postgres://"},
		{"dataapi missing registry", "shindo-dataapi", []string{"-registry", filepath.Join(t.TempDir(), "none.json"), "-grpc-addr", free(), "-admin-addr", free(), "-http-addr", free()}, 1, "none.json"},
		{"edge without cores", "shindo-edge", nil, 2, "rts needs at least one core address"},
		{"edge report delay too short", "shindo-edge", []string{"-rts", dead, "-report-delay", "100ms"}, 2, "report-delay: 1s to 10m"},
		{"edge data API watch not host:port", "shindo-edge", []string{"-rts", dead, "-data-grpc", "tnn1"}, 2, `data-grpc "tnn1": want host:port`},
		{"dataapi no watchers", "shindo-dataapi", []string{"-registry", registry, "-max-watchers", "0"}, 2, "max-watchers: 1 to 10000"},
		{"edge bad reuse-port value", "shindo-edge", []string{"-rts", dead, "-http-reuse-port=maybe"}, 2, "http-reuse-port"},
		{"rts busy port", "shindo-rts", []string{"-registry", registry, "-grpc-addr", busy.Addr().String(), "-admin-addr", free()}, 1, "address already in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, nil, filepath.Join(bin, tt.bin), tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, tt.wantCode, tt.want)
			}
			last := lastLine(stderr)
			if !strings.HasPrefix(last, tt.bin+": ") {
				t.Fatalf("last line %q does not name the binary", last)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestStartWithoutDependencies: ingest starts while its core's svc-rts and
// svc-waveform are down (it keeps what it acks in its journal until they
// come), and an edge while its cores are: each stays up, says what it
// waits for, and stops cleanly.
func TestStartWithoutDependencies(t *testing.T) {
	bin := binDir(t)
	registry := filepath.Join(t.TempDir(), "stations.json")
	writeFile(t, registry, `[{"id":"S1","key_id":1,"key_hex":"000102030405060708090a0b0c0d0e0f"}]`)
	dead := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	free := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	for _, tc := range []struct {
		bin  string
		args []string
	}{
		{"shindo-ingest", []string{"-registry", registry, "-data-dir", t.TempDir(), "-rts", dead, "-waveform", dead, "-udp-addr", "127.0.0.1:0", "-ws-addr", free()}},
		{"shindo-edge", []string{"-rts", dead + "," + dead, "-http-addr", free()}},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			admin := free()
			var stderr lockedBuffer
			cmd := exec.Command(filepath.Join(bin, tc.bin), append(tc.args, "-dependency-wait", "1s", "-grpc-addr", free(), "-admin-addr", admin)...)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			if !poll.Within(15*time.Second, func() bool { return strings.Contains(stderr.String(), "dependency not serving yet") }) {
				t.Fatalf("no word of the missing dependency:\n%s", stderr.String())
			}
			if code, _ := httpGet(t, "http://"+admin+"/healthz"); code != 200 {
				t.Fatalf("not alive: /healthz %d", code)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("stopping: %v\n%s", err, stderr.String())
			}
		})
	}
}
