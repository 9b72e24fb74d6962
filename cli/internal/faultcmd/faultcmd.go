// Package faultcmd implements `shindo fault`: it takes parts of a running
// `shindo dev` down and up through its control API, to watch the system
// ride out the failures SPEC §8 lists — a process or a whole site crashing
// or stopping, an uplink or the link between the cores degraded, cut and
// healed.
package faultcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"shindo.dev/cli/internal/devcontrol"
	"shindo.dev/cli/internal/netprofile"
)

// usage is the help text; the profiles are netprofile's.
var usage = `Usage: shindo fault [-dir DIR] COMMAND [ARGS]

Commands:
  ps                     list the processes of the running shindo dev
  kill TARGET            crash TARGET (SIGKILL)
  stop TARGET            stop TARGET in order (SIGTERM)
  start TARGET           start TARGET again, with its flags and data; waits until ready
  links                  list the network links, the profile each is under, and the profiles
  degrade LINK PROFILE   put LINK under PROFILE
  cut LINK               cut LINK both ways (the profile cut)
  heal LINK              restore LINK (the profile clear)
  partition              cut the link between the cores (both keep serving): cut intersite
  heal                   restore the link between the cores: heal intersite

TARGET is a process (TNN-1-rts, KHH-1-edge, …; see ps) or a site (TNN-1,
TYO-1, TPE-1, KHH-1: all its processes; the dev metadata database stays).

LINK is uplink-TNN-1 or uplink-TYO-1 (the stations' uplinks, UDP and
WebSocket, to that core) or intersite (the link between the cores). Under
shindo dev -wan every link is one between two sites' network namespaces,
carrying all their traffic, and the edges' links to the cores
(edge-TPE-1-TNN-1, edge-TPE-1-TYO-1, edge-KHH-1-TNN-1, edge-KHH-1-TYO-1)
can be degraded and cut as well.

PROFILE is one of:
` + profileList() + `
Flags:
`

func profileList() string {
	var b strings.Builder
	for _, p := range netprofile.Profiles() {
		fmt.Fprintf(&b, "  %-9s %s\n", p.Name, p.Summary)
	}
	return b.String()
}

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
	c, err := parseArgs(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "shindo fault: %v\n", err)
		fs.Usage()
		return 2
	}
	base, err := devcontrol.URL(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "shindo fault: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := do(ctx, base, c, stdout); err != nil {
		fmt.Fprintf(stderr, "shindo fault: %v\n", err)
		return 1
	}
	return 0
}

// command is a parsed command line: the command, its target (a process,
// a site or a link) and, for degrade, the profile.
type command struct {
	name, target, profile string
}

func parseArgs(args []string) (command, error) {
	if len(args) == 0 {
		return command{}, errors.New("no command given")
	}
	c := command{name: args[0]}
	n := len(args) - 1
	switch c.name {
	case "ps", "partition", "links":
		if n != 0 {
			return command{}, fmt.Errorf("%s takes no arguments", c.name)
		}
	case "heal":
		// Without a link, the link between the cores, as before links.
		if n > 1 || (n == 1 && args[1] == "") {
			return command{}, errors.New("heal takes one link, or none for the link between the cores")
		}
		if n == 1 {
			c.target = args[1]
		}
	case "cut":
		if n != 1 || args[1] == "" {
			return command{}, errors.New("cut needs one link")
		}
		c.target = args[1]
	case "degrade":
		if n != 2 || args[1] == "" || args[2] == "" {
			return command{}, errors.New("degrade needs a link and a profile")
		}
		c.target, c.profile = args[1], args[2]
	case "kill", "stop", "start":
		if n != 1 || args[1] == "" {
			return command{}, fmt.Errorf("%s needs one target: a process or a site", c.name)
		}
		c.target = args[1]
	default:
		return command{}, fmt.Errorf("unknown command %q", c.name)
	}
	return c, nil
}

// route is the control API's method and path for c.
func (c command) route() (method, path string) {
	switch {
	case c.name == "ps":
		return http.MethodGet, "/v1/processes"
	case c.name == "links":
		return http.MethodGet, "/v1/links"
	case c.name == "partition", c.name == "heal" && c.target == "":
		return http.MethodPost, "/v1/intersite/" + c.name
	case c.name == "degrade":
		return http.MethodPost, "/v1/links/" + url.PathEscape(c.target) + "/degrade?profile=" + url.QueryEscape(c.profile)
	case c.name == "cut", c.name == "heal":
		return http.MethodPost, "/v1/links/" + url.PathEscape(c.target) + "/" + c.name
	}
	kind := "processes"
	if isSite(c.target) {
		kind = "sites"
	}
	return http.MethodPost, "/v1/" + kind + "/" + url.PathEscape(c.target) + "/" + c.name
}

func do(ctx context.Context, base string, c command, stdout io.Writer) error {
	method, path := c.route()
	body, err := devcontrol.Call(ctx, http.DefaultClient, method, base, path)
	if err != nil {
		return err
	}
	switch c.name {
	case "ps":
		return printStates(stdout, body)
	case "links":
		return printLinks(stdout, body)
	case "degrade", "cut", "heal":
		if c.target != "" {
			return printLink(stdout, body)
		}
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
	fmt.Fprintf(stdout, "%s: %s\n", c.name, strings.Join(done.Processes, ", "))
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

// linkState is a link as the control API reports it.
type linkState struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	From    string            `json:"from"`
	To      string            `json:"to"`
	Profile string            `json:"profile"`
	Phase   string            `json:"phase"`
	UDP     string            `json:"udp"`
	WS      string            `json:"ws"`
	NATS    map[string]string `json:"nats"`
	// Address is each end's address, by site, under shindo dev -wan.
	Address map[string]string `json:"address"`
}

// where lists the addresses of the link's proxies, or under -wan its
// ends' and, for an uplink, where the stations send.
func (l linkState) where() string {
	var out []string
	if len(l.Address) > 0 {
		out = append(out, l.From+" "+l.Address[l.From]+" ⇄ "+l.To+" "+l.Address[l.To])
		if l.UDP != "" {
			out = append(out, l.UDP)
		}
		return strings.Join(out, ", ")
	}
	if l.UDP != "" {
		out = append(out, l.UDP)
	}
	if l.WS != "" {
		out = append(out, l.WS)
	}
	sites := make([]string, 0, len(l.NATS))
	for site := range l.NATS {
		sites = append(sites, site)
	}
	slices.Sort(sites)
	for _, site := range sites {
		out = append(out, site+" "+l.NATS[site])
	}
	return strings.Join(out, ", ")
}

// profile names the profile and, for one of phases, the current phase.
func (l linkState) profile() string {
	if l.Phase != "" && l.Phase != l.Profile {
		return l.Profile + " (" + l.Phase + ")"
	}
	return l.Profile
}

func printLinks(w io.Writer, body []byte) error {
	var doc struct {
		Links        []linkState `json:"links"`
		Unimpairable []struct {
			Name string `json:"name"`
			Why  string `json:"why"`
		} `json:"unimpairable"`
		Profiles []struct {
			Name    string `json:"name"`
			Summary string `json:"summary"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tFROM\tTO\tPROFILE\tTHROUGH")
	for _, l := range doc.Links {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Name, l.From, l.To, l.profile(), l.where())
	}
	tw.Flush()
	for _, l := range doc.Unimpairable {
		fmt.Fprintf(w, "%s: %s\n", l.Name, l.Why)
	}
	fmt.Fprintln(w, "profiles:")
	for _, p := range doc.Profiles {
		fmt.Fprintf(w, "  %-9s %s\n", p.Name, p.Summary)
	}
	return nil
}

func printLink(w io.Writer, body []byte) error {
	var l linkState
	if err := json.Unmarshal(body, &l); err != nil || l.Name == "" {
		return fmt.Errorf("control API answered %q: %v", body, err)
	}
	fmt.Fprintf(w, "%s: %s\n", l.Name, l.profile())
	return nil
}
