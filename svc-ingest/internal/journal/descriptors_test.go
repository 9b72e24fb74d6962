package journal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestOutOfDescriptors: with every descriptor of the process taken (as a
// connection flood would take them), the journal still appends across
// segment boundaries, saves its cursors and reads old segments, on the
// descriptors it keeps in reserve. The process's limit is lowered, so the
// test runs in a child process of its own.
func TestOutOfDescriptors(t *testing.T) {
	if os.Getenv("JOURNAL_FD_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfDescriptors$", "-test.v")
		cmd.Env = append(os.Environ(), "JOURNAL_FD_CHILD="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	dir := os.Getenv("JOURNAL_FD_CHILD")
	j, err := Open(dir, Options{SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	payload := make([]byte, 1000)
	if _, err := j.Append(context.Background(), payload); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Read(0, 1); err != nil { // one segment reader open
		t.Fatal(err)
	}

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var hog []*os.File
	defer func() {
		for _, f := range hog {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		hog = append(hog, f)
	}

	// 40 KB over 4 KiB segments: ten rotations, each needing a descriptor.
	for i := range 40 {
		if _, err := j.Append(context.Background(), payload); err != nil {
			t.Fatalf("append %d with no descriptor free: %v", i, err)
		}
	}
	if err := j.SaveCursors(); err != nil {
		t.Fatal(err)
	}
	j.SetCursor("c", 5)
	if err := j.SaveCursors(); err != nil {
		t.Fatalf("save cursors with no descriptor free: %v", err)
	}
	got, err := j.Read(0, 100)
	if err != nil || len(got) != 41 {
		t.Fatalf("read with no descriptor free: %d records, %v", len(got), err)
	}
	segs, failures := len(j.segs), j.RotateFailures()
	t.Logf("segments %d, rotate failures %d", segs, failures)
	if segs < 8 || failures != 0 {
		t.Fatalf("%d segments, %d rotations failed: the spares should have let every segment start", segs, failures)
	}
}
