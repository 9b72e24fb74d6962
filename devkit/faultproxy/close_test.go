package faultproxy

import (
	"runtime"
	"testing"
	"time"

	"shindo.dev/devkit/poll"
)

// TestCloseReleasesGoroutines runs alone (not parallel): Go starts parallel
// tests only after the sequential ones, so the goroutine count here is the
// proxies' and their stand-ins' alone.
func TestCloseReleasesGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("busy proxies", func(t *testing.T) {
		udpTarget := startUDPTarget(t, true)
		u := startUDP(t, udpTarget, Options{Seed: 1})
		tcpTarget := startTCPEcho(t)
		tp := startTCP(t, tcpTarget, Options{Seed: 1})

		// UDP: several flows, one datagram delivered, others waiting in the
		// delay queue and a reorder hold when Close comes.
		for i := range 4 {
			c := dialUDPClient(t, u.Addr())
			c.send(t, numbered(i))
			poll.Until(t, 5*time.Second, "an echo", func() bool { return c.count() == 1 })
		}
		u.Set(Upstream, Impairment{Delay: time.Minute})
		u.Set(Downstream, Impairment{Reorder: 1})
		c := dialUDPClient(t, u.Addr())
		c.send(t, numbered(9))
		poll.Until(t, 5*time.Second, "a queued datagram", func() bool { return u.Stats().Upstream.Delayed == 1 })

		// TCP: one connection blackholed with a chunk held, one delayed.
		tp.Set(Upstream, Impairment{Blackhole: true})
		tp.Set(Downstream, Impairment{Delay: time.Minute})
		held := dialTCP(t, tp.Addr())
		if _, err := held.Write([]byte("held")); err != nil {
			t.Fatalf("write: %v", err)
		}
		poll.Until(t, 5*time.Second, "a held chunk", func() bool { return tp.Stats().Upstream.Held == 1 })

		done := make(chan struct{})
		go func() {
			_ = u.Close()
			_ = tp.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return")
		}
		// Close again: the first call's result, at once.
		if err := u.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
		if err := tp.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
	})
	// The subtest's cleanups (stand-ins, client sockets) have run; Close
	// itself waited for the proxies' goroutines, so only the stand-ins'
	// exits may still be in flight.
	poll.Until(t, 5*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}
