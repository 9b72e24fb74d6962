// Command shindo is the operator's tool for a shindo network: it runs the
// whole topology locally (dev), injects faults into it (fault, chaos), runs a
// station (station) or a simulated fleet (sim), and computes the seismic
// intensity of records (intensity).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"

	"shindo.dev/cli/internal/certcmd"
	"shindo.dev/cli/internal/chaoscmd"
	"shindo.dev/cli/internal/devstack"
	"shindo.dev/cli/internal/etcdcmd"
	"shindo.dev/cli/internal/faultcmd"
	"shindo.dev/cli/internal/intensitycmd"
	"shindo.dev/cli/internal/migratecmd"
	"shindo.dev/cli/internal/natscmd"
	"shindo.dev/cli/internal/provision"
	"shindo.dev/cli/internal/stationcmd"
	"shindo.dev/lib/service"
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{
	"cert":      {"issue and renew a service's certificate from the operator's CA; show what a certificate is for", certcmd.Main},
	"chaos":     {"inject random faults into a running shindo dev and prove the invariants held", chaoscmd.Main},
	"dev":       {"run the whole topology on this machine with a simulated fleet", devstack.Main},
	"station":   {"run one station: measure, sign and send on both uplinks", stationcmd.StationMain},
	"sim":       {"run a simulated fleet of stations from a registry file", stationcmd.SimMain},
	"etcd":      {"run one member of the quorum store (etcd) in-process", etcdcmd.Main},
	"fault":     {"take parts of a running shindo dev down and up, cut, degrade and heal its links", faultcmd.Main},
	"intensity": {"compute the JMA seismic intensity of acceleration records", intensitycmd.Main},
	"migrate":   {"apply the metadata database schema migrations", migratecmd.Main},
	"nats":      {"run a core's NATS server (JetStream) in-process", natscmd.Main},
	"provision": {"create simulated stations through a data API and save their keys", provision.Main},
}

func main() {
	ctx, stop := service.SignalContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "shindo: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: shindo <command> [flags]   (shindo <command> -h for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}
