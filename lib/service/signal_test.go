package service

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// signalChild, set in the environment, makes the test binary a process
// whose shutdown never ends: it waits for SignalContext's cancellation,
// says so, and then hangs as a shutdown past its bound would.
const signalChild = "SHINDO_SIGNAL_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(signalChild) != "" {
		ctx, _ := SignalContext()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Stdout.WriteString("stopping\n")
		select {}
	}
	os.Exit(m.Run())
}

// TestSecondSignalEnds: the first SIGINT cancels the context and leaves the
// process to its shutdown; a second ends it at once, by the signal.
func TestSecondSignalEnds(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), signalChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child said %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	expect("ready")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	expect("stopping")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the first SIGINT ended the child: %v", err)
	case <-time.After(200 * time.Millisecond): // the child must still be shutting down
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("child ended with %v", err)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Errorf("child ended with %v, want killed by SIGINT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second SIGINT did not end the child")
	}
}
