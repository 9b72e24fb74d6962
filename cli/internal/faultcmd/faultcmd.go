// Package faultcmd implements `shindo fault`: it takes parts of a running
// `shindo dev` down and up through its control API, to watch the system
// ride out the failures SPEC §8 lists — a process or a whole site crashing
// or stopping, the link between the cores cut and healed.
package faultcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

const usage = `Usage: shindo fault [-dir DIR] COMMAND [TARGET]

Commands:
  ps                  list the processes of the running shindo dev
  kill TARGET         crash TARGET (SIGKILL)
  stop TARGET         stop TARGET in order (SIGTERM)
  start TARGET        start TARGET again, with its flags and data; waits until ready
  partition           cut the link between the cores (both keep serving)
  heal                restore the link between the cores

TARGET is a process (TNN-1-rts, KHH-1-edge, …; see ps) or a site (TNN-1,
TYO-1, TPE-1, KHH-1: all its processes; the dev metadata database stays).

Flags:
`

// Main runs the command with args (after "fault").
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shindo fault", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "var/dev", "directory of the running shindo dev (its -dir)")
	timeout := fs.Duration("timeout", 3*time.Minute, "longest to wait for the action")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cmd, target, err := parseArgs(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "shindo fault: %v\n", err)
		fs.Usage()
		return 2
	}
	base, err := controlURL(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "shindo fault: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := do(ctx, base, cmd, target, stdout); err != nil {
		fmt.Fprintf(stderr, "shindo fault: %v\n", err)
		return 1
	}
	return 0
}

func parseArgs(args []string) (cmd, target string, err error) {
	if len(args) == 0 {
		return "", "", errors.New("no command given")
	}
	cmd = args[0]
	switch cmd {
	case "ps", "partition", "heal":
		if len(args) != 1 {
			return "", "", fmt.Errorf("%s takes no target", cmd)
		}
	case "kill", "stop", "start":
		if len(args) != 2 || args[1] == "" {
			return "", "", fmt.Errorf("%s needs one target: a process or a site", cmd)
		}
		target = args[1]
	default:
		return "", "", fmt.Errorf("unknown command %q", cmd)
	}
	return cmd, target, nil
}

// controlURL reads the control API's address from dir/endpoints.json.
func controlURL(dir string) (string, error) {
	path := filepath.Join(dir, "endpoints.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("no running shindo dev found (%v); start one with `make run`, or give its -dir", err)
	}
	var doc struct {
		Dev struct {
			Control string `json:"control"`
		} `json:"dev"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Dev.Control == "" {
		return "", fmt.Errorf("%s names no control API: is it from this version of shindo dev?", path)
	}
	return doc.Dev.Control, nil
}

func do(ctx context.Context, base, cmd, target string, stdout io.Writer) error {
	method, path := http.MethodPost, ""
	switch cmd {
	case "ps":
		method, path = http.MethodGet, "/v1/processes"
	case "partition", "heal":
		path = "/v1/intersite/" + cmd
	default:
		kind := "processes"
		if isSite(target) {
			kind = "sites"
		}
		path = "/v1/" + kind + "/" + target + "/" + cmd
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("control API at %s: %w (is shindo dev still running?)", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("control API: %s", resp.Status)
	}
	if cmd == "ps" {
		return printStates(stdout, body)
	}
	var done struct {
		Processes   []string `json:"processes"`
		Partitioned *bool    `json:"partitioned"`
	}
	if err := json.Unmarshal(body, &done); err != nil {
		return fmt.Errorf("control API answered %q: %w", body, err)
	}
	if done.Partitioned != nil {
		state := "healed: the cores reach each other"
		if *done.Partitioned {
			state = "partitioned: the cores cannot reach each other"
		}
		fmt.Fprintln(stdout, state)
		return nil
	}
	fmt.Fprintf(stdout, "%s: %s\n", cmd, strings.Join(done.Processes, ", "))
	return nil
}

// isSite tells a site name (TNN-1) from a process name (TNN-1-rts).
func isSite(target string) bool { return strings.Count(target, "-") == 1 }

func printStates(w io.Writer, body []byte) error {
	var doc struct {
		Processes []struct {
			Name  string `json:"name"`
			Site  string `json:"site"`
			Role  string `json:"role"`
			PID   int    `json:"pid"`
			State string `json:"state"`
		} `json:"processes"`
		Partitioned bool `json:"partitioned"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tSITE\tROLE\tSTATE\tPID")
	for _, p := range doc.Processes {
		pid := "-"
		if p.PID > 0 {
			pid = fmt.Sprint(p.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.Site, p.Role, p.State, pid)
	}
	tw.Flush()
	link := "up"
	if doc.Partitioned {
		link = "partitioned"
	}
	fmt.Fprintf(w, "inter-site link: %s\n", link)
	return nil
}
