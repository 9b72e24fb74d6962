//go:build !linux

package e2e

import (
	"os/exec"
	"testing"
)

func wanUnavailable() string { return "shindo dev -wan needs Linux network namespaces" }

func inNetns(t testing.TB, ns string, fn func()) {
	t.Helper()
	if ns != "" {
		t.Fatal(wanUnavailable())
	}
	fn()
}

func commandIn(t testing.TB, ns, bin string, args ...string) *exec.Cmd {
	t.Helper()
	if ns != "" {
		t.Fatal(wanUnavailable())
	}
	return exec.Command(bin, args...)
}
