package service

import (
	"context"
	"os"

	"shindo.dev/lib/conf"
)

// Main is the body of every service binary: it loads cfg for the
// environment prefix (SHINDO_<prefix>_…) from the command line and
// environment, runs it with run until SIGINT or SIGTERM, and returns the exit
// status, which main alone passes to os.Exit.
func Main[C any](name, prefix string, cfg *C, run func(context.Context, C) error) int {
	ctx, stop := SignalContext()
	defer stop()
	err := conf.Load(cfg, prefix, os.Args[1:], conf.Options{Name: name})
	if err == nil {
		err = run(ctx, *cfg)
	}
	return ExitCode(os.Stderr, name, err)
}
