package wan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The TUN driver's interface (linux/if_tun.h).
const (
	tunSetIff = 0x400454ca
	iffTun    = 0x0001
	iffNoPi   = 0x1000
)

func checkSystem() error {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("no /dev/net/tun (the TUN driver): %w", err)
	}
	return nil
}

// openTUN creates the TUN device name in the network namespace of the
// calling thread and returns it, non-blocking so that reads go through
// the runtime's poller and Close ends them. It lives until it is closed.
func openTUN(name string) (*os.File, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var ifr [40]byte // struct ifreq: the name, then the flags
	copy(ifr[:syscall.IFNAMSIZ-1], name)
	binary.NativeEndian.PutUint16(ifr[syscall.IFNAMSIZ:], iffTun|iffNoPi)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), tunSetIff, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		syscall.Close(fd)
		return nil, fmt.Errorf("create TUN device %s: %w", name, errno)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "tun:"+name), nil
}

// inNetns runs fn on an OS thread moved into the named namespace: the
// sockets and devices fn creates belong to it, and stay there when used
// from any other thread. The thread goes back to its own namespace after,
// or, if it cannot, is retired with its goroutine.
func inNetns(ns string, fn func() error) error {
	target, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", ns, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer self.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := setns(self); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("leave %s: %w", ns, err)) // still locked: the thread ends with us
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }
