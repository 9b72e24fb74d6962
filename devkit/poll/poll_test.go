package poll

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping the
// test that runs it.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestUntil(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	Until(t, 5*time.Second, "the third call", func() bool { return n.Add(1) == 3 })
	if n.Load() != 3 || time.Since(start) > time.Second {
		t.Fatalf("%d calls in %s", n.Load(), time.Since(start))
	}
	r := &recorder{TB: t}
	start = time.Now()
	Until(r, 100*time.Millisecond, "never", func() bool { return false })
	if r.failed != "not within 100ms: never" || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("failed %q after %s", r.failed, time.Since(start))
	}
}

func TestUntilNil(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	UntilNil(r, 50*time.Millisecond, "the server answers", func() error {
		calls++
		return fmt.Errorf("refused %d", calls)
	})
	if want := fmt.Sprintf("not within 50ms: the server answers: refused %d", calls); r.failed != want || calls < 2 {
		t.Fatalf("failed %q, want %q", r.failed, want)
	}
	r = &recorder{TB: t}
	UntilNil(r, time.Second, "at once", func() error { return nil })
	if r.failed != "" {
		t.Fatal(r.failed)
	}
}

func TestWithin(t *testing.T) {
	if Within(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
	err := errors.New("x")
	if !Within(time.Second, func() bool { return err != nil }) {
		t.Fatal("a condition that holds did not")
	}
}
