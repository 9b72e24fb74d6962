package service

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext is canceled by the first SIGINT or SIGTERM. The signals are
// then handed back to their default action, so a second one ends the
// process at once: an operator who interrupts twice does not wait out a
// shutdown's bound, and a supervisor's second SIGTERM is not swallowed.
// stop releases the signals early.
func SignalContext() (ctx context.Context, stop func()) {
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
