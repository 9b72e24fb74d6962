package e2e

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// wanUnavailable says why shindo dev -wan cannot run here, or "".
func wanUnavailable() string {
	if os.Geteuid() != 0 {
		return "shindo dev -wan needs root for network namespaces"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return "shindo dev -wan needs /dev/net/tun: " + err.Error()
	}
	if _, err := ipCommand(); err != nil {
		return "shindo dev -wan needs ip (iproute2)"
	}
	return ""
}

func ipCommand() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// inNetns runs fn on the calling goroutine's thread moved into network
// namespace ns ("" for this one): the sockets fn opens belong to ns and
// stay there. If fn ends the test, or the thread cannot go back, the
// thread stays locked and is retired with the goroutine.
func inNetns(t testing.TB, ns string, fn func()) {
	t.Helper()
	if ns == "" {
		fn()
		return
	}
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("enter %s: %v", ns, err)
	}
	defer func() {
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	fn()
}

// commandIn is exec.Command run in network namespace ns ("" for this one).
func commandIn(t testing.TB, ns, bin string, args ...string) *exec.Cmd {
	t.Helper()
	if ns == "" {
		return exec.Command(bin, args...)
	}
	ip, err := ipCommand()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(ip, append([]string{"netns", "exec", ns, bin}, args...)...)
}
