// Package poll waits in tests for a condition to hold, with a deadline,
// instead of sleeping for a guessed time: a test then takes as long as the
// system needs and no longer, and fails with what it waited for.
package poll

import (
	"testing"
	"time"
)

// interval is how often a condition is asked: a hundredth of the
// deadline, between 5 and 50 ms.
func interval(timeout time.Duration) time.Duration {
	return min(max(timeout/100, 5*time.Millisecond), 50*time.Millisecond)
}

// Until calls cond until it returns true, and fails t (Fatal) with what
// when it has not within timeout.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(timeout, cond) {
		t.Fatalf("not within %s: %s", timeout, what)
	}
}

// UntilNil calls cond until it returns nil, and fails t (Fatal) with what
// and cond's last error when it has not within timeout.
func UntilNil(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	var last error
	if !Within(timeout, func() bool { last = cond(); return last == nil }) {
		t.Fatalf("not within %s: %s: %v", timeout, what, last)
	}
}

// Within calls cond until it returns true or timeout has passed, and
// reports whether it held: for a test that goes on either way.
func Within(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	every := interval(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}
