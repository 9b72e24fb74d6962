package service

import (
	"errors"
	"fmt"
	"io"

	"shindo.dev/lib/conf"
)

// ExitCode reports err as the one line a binary prints on failure and
// returns the process exit status for main to pass to os.Exit: 0 on success
// or -h, 2 for a configuration mistake, 1 for anything else.
func ExitCode(stderr io.Writer, name string, err error) int {
	var usage *conf.UsageError
	switch {
	case err == nil, errors.Is(err, conf.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s: %v (see -h)\n", name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
}
