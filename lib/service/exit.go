package service

import (
	"errors"
	"fmt"
	"io"
	"strings"

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
		fmt.Fprintf(stderr, "%s: %s (see -h)\n", name, OneLine(err))
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %s\n", name, OneLine(err))
		return 1
	}
}

// OneLine renders err on one line: drivers such as pgx put each connection
// attempt on a line of its own and repeat identical ones (with and without
// TLS); those are said once, joined by "; ".
func OneLine(err error) string {
	var parts []string
	seen := map[string]bool{}
	for line := range strings.Lines(err.Error()) {
		line = strings.Join(strings.Fields(line), " ")
		if line != "" && !seen[line] {
			seen[line] = true
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}
