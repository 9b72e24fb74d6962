package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildTSSDK builds the TypeScript SDK (sdk/ts) as its README says a user
// does, in a copy of its sources: npm ci (protoc-gen-es, typescript and
// @bufbuild/protobuf at the versions the lock pins), its messages generated
// from proto/ by the repository's buf (make tools) with protoc-gen-es, and
// tsc over the whole of it, generated code included. It returns the
// directory to run node in, or an error saying which step failed.
func buildTSSDK() (string, error) {
	repo, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	buf := filepath.Join(repo, ".bin", "buf")
	if _, err := os.Stat(buf); err != nil {
		return "", fmt.Errorf("buf not installed (make tools): %w", err)
	}
	dir, err := os.MkdirTemp("", "shindo-tssdk-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(repo, "sdk", "ts")
	for _, f := range []string{"package.json", "package-lock.json", "buf.gen.yaml", "tsconfig.json", "src/client.ts", "src/read.ts"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return dir, err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			return dir, err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return dir, err
		}
	}
	bin := filepath.Join(dir, "node_modules", ".bin")
	for _, step := range [][]string{
		{"npm", "ci", "--no-audit", "--no-fund"},
		{buf, "generate", "--template", "buf.gen.yaml", repo},
		{filepath.Join(bin, "tsc"), "-p", "."},
	} {
		cmd := exec.Command(step[0], step[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return dir, fmt.Errorf("%s: %v\n%s", strings.Join(step, " "), err, out)
		}
	}
	return dir, nil
}

// runNode runs node with args in dir and returns what it printed; a
// failure ends the test with what it said on stderr.
func runNode(t *testing.T, dir, what string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s: %v\n%s", what, err, stderr)
	}
	return out
}

// checkTSSDK reads the stations, the reports and the detections through
// both edges with the TypeScript SDK, run by node, and checks it read what
// the data API holds: every station, the report posted, every detection,
// decoded by the generated schemas from the JSON the gateways send.
func checkTSSDK(t *testing.T, d *dev, dir, report string) {
	t.Helper()
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	khh := d.endpoints.get(t, "KHH-1", "edge", "http")
	// The first entrance refuses connections: the SDK moves on, as the
	// client rules say.
	out := runNode(t, dir, "the TypeScript SDK's reader", "dist/src/read.js", "http://127.0.0.1:1", tpe, khh)
	var got struct {
		Stations []struct {
			ID       string
			Lat, Lon float64
			Code     int
		}
		Reports []struct {
			ID        string
			TimeMs    int64
			Magnitude float64
		}
		Newest struct {
			ID    string
			Areas []struct{ Code, Level int }
		}
		Detections []struct {
			ID     string
			Serial int
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the TypeScript SDK's reader printed %q: %v", out, err)
	}
	var want struct {
		Stations []struct {
			ID string `json:"id"`
		} `json:"stations"`
		Detections []struct {
			ID string `json:"id"`
		} `json:"detections"`
	}
	for _, path := range []string{"/v1/stations", "/v1/detections?page_size=50"} {
		code, body := httpGet(t, tpe+path)
		if code != 200 || json.Unmarshal([]byte(body), &want) != nil {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	var ids, wantIDs []string
	for _, s := range got.Stations {
		ids = append(ids, s.ID)
		if s.Lat == 0 || s.Lon == 0 || s.Code == 0 {
			t.Errorf("station %s read without its place: %+v", s.ID, s)
		}
	}
	for _, s := range want.Stations {
		wantIDs = append(wantIDs, s.ID)
	}
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("the SDK read stations %v, the data API lists %v", ids, wantIDs)
	}
	if len(got.Reports) != 1 || got.Reports[0].ID != report || got.Reports[0].Magnitude != 6.1 || got.Reports[0].TimeMs < time.Now().Add(-time.Hour).UnixMilli() {
		t.Errorf("the SDK read reports %+v, not the one posted (%s, M6.1, just now)", got.Reports, report)
	}
	if got.Newest.ID != report || len(got.Newest.Areas) != 1 || got.Newest.Areas[0].Code != 970 || got.Newest.Areas[0].Level != 6 {
		t.Errorf("the SDK read the report alone as %+v, want %s with area 970 at level 6", got.Newest, report)
	}
	ids, wantIDs = nil, nil
	for _, x := range got.Detections {
		ids = append(ids, x.ID)
	}
	for _, x := range want.Detections {
		wantIDs = append(wantIDs, x.ID)
	}
	if len(ids) == 0 || !slices.Equal(ids, wantIDs) {
		t.Errorf("the SDK read detections %v, the data API lists %v", ids, wantIDs)
	}
	t.Logf("the TypeScript SDK read %d stations, %d reports and %d detections", len(got.Stations), len(got.Reports), len(got.Detections))
}
