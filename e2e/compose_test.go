package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// There is no Docker engine to run docker-compose.yml on, so TestCompose
// checks it against what it describes instead: the Dockerfile's stages, the
// flags of the built binaries (their -h output) and the topology that
// `shindo dev` runs (cli/internal/devstack/plan.go).

// composeRequired lists, per program, the flags docker-compose.yml must set:
// those plan.go passes (besides the log level), and the ones each binary's
// Validate requires. A program missing here fails the test, so a new binary
// cannot join the compose file unchecked.
var composeRequired = map[string][]string{
	"shindo-ingest":   {"site", "grpc-addr", "admin-addr", "shutdown-timeout", "udp-addr", "ws-addr", "database-url", "rts", "waveform", "data-dir", "nats", "peer-nats", "peer-site"},
	"shindo-rts":      {"site", "grpc-addr", "admin-addr", "shutdown-timeout", "database-url"},
	"shindo-waveform": {"site", "grpc-addr", "admin-addr", "shutdown-timeout", "data-dir"},
	"shindo-dataapi":  {"site", "grpc-addr", "admin-addr", "shutdown-timeout", "http-addr", "database-url", "admin-tokens", "ingest", "peer-ingest", "waveform", "waveform-dir", "nats", "trusted-proxies"},
	"shindo-edge":     {"site", "grpc-addr", "admin-addr", "shutdown-timeout", "http-addr", "rts", "data-api", "data-grpc", "waveform", "entrances", "nats", "etcd", "notify-tokens"},
	"shindo sim":      {"stations-file", "primary", "status-addr", "log-format"},
	"shindo nats":     {"site", "client-addr", "http-addr", "store-dir"},
	"shindo etcd":     {"name", "data-dir", "client-url", "peer-url", "initial-cluster"},
	// The network's certificates (compose_tls_test.go checks them).
	"shindo cert bootstrap": {"ca-dir", "dir", "issue", "ca-copy"},
}

// composeDeps are the flags that address another process: each address must
// name a compose service running target on the port of its targetFlag.
var composeDeps = []struct{ program, flag, target, targetFlag string }{
	{"shindo-ingest", "rts", "shindo-rts", "grpc-addr"},
	{"shindo-ingest", "waveform", "shindo-waveform", "grpc-addr"},
	{"shindo-edge", "rts", "shindo-rts", "grpc-addr"},
	{"shindo-edge", "data-api", "shindo-dataapi", "http-addr"},
	{"shindo-edge", "data-grpc", "shindo-dataapi", "grpc-addr"},
	{"shindo-edge", "waveform", "shindo-waveform", "grpc-addr"},
	{"shindo-dataapi", "waveform", "shindo-waveform", "grpc-addr"},
	{"shindo-dataapi", "ingest", "shindo-ingest", "grpc-addr"},
	{"shindo-dataapi", "peer-ingest", "shindo-ingest", "grpc-addr"},
	{"shindo-edge", "nats", "shindo nats", "client-addr"},
	{"shindo-dataapi", "nats", "shindo nats", "client-addr"},
	{"shindo-edge", "etcd", "shindo etcd", "client-url"},
	{"shindo sim", "primary", "shindo-ingest", "udp-addr"},
	{"shindo sim", "backup", "shindo-ingest", "udp-addr"},
}

// composeFileFlags name files the process reads; they must come from a
// read-only mount.
var composeFileFlags = []string{"registry", "stations-file", "ca-file"}

var composeSites = []string{"TNN-1", "TYO-1", "TPE-1", "KHH-1"}

// composeYAML is the part of docker-compose.yml the test reads.
type composeYAML struct {
	Services map[string]composeServiceYAML `yaml:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `yaml:"subnet"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
}

type composeServiceYAML struct {
	Image string `yaml:"image"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
		Target     string `yaml:"target"`
	} `yaml:"build"`
	Entrypoint      words        `yaml:"entrypoint"`
	Command         words        `yaml:"command"`
	Environment     envVars      `yaml:"environment"`
	Ports           []string     `yaml:"ports"`
	Volumes         volumeMounts `yaml:"volumes"`
	DependsOn       dependsOn    `yaml:"depends_on"`
	Restart         string       `yaml:"restart"`
	StopGracePeriod string       `yaml:"stop_grace_period"`
	Networks        map[string]struct {
		IPv4Address string `yaml:"ipv4_address"`
	} `yaml:"networks"`
}

// words is a command line given as a list or as one string.
type words []string

func (w *words) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*w = strings.Fields(n.Value)
		return nil
	}
	return n.Decode((*[]string)(w))
}

// envVars is an environment given as a mapping or as a list of K=V.
type envVars map[string]string

func (e *envVars) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		return n.Decode((*map[string]string)(e))
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*e = envVars{}
	for _, kv := range list {
		k, v, _ := strings.Cut(kv, "=")
		(*e)[k] = v
	}
	return nil
}

// dependsOn is depends_on, as a list or as a mapping with conditions.
type dependsOn struct {
	names []string
	// condition by name: "service_started" for the list form.
	condition map[string]string
}

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	d.condition = map[string]string{}
	if n.Kind != yaml.MappingNode {
		if err := n.Decode(&d.names); err != nil {
			return err
		}
		for _, name := range d.names {
			d.condition[name] = "service_started"
		}
		return nil
	}
	for i := 0; i < len(n.Content); i += 2 {
		var c struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Content[i+1].Decode(&c); err != nil {
			return err
		}
		if c.Condition == "" {
			c.Condition = "service_started"
		}
		d.names = append(d.names, n.Content[i].Value)
		d.condition[n.Content[i].Value] = c.Condition
	}
	return nil
}

// volumeMount is one entry of volumes, from the short syntax
// (source:target[:ro]) or the long one.
type volumeMount struct {
	bind           bool // a host path, else a named volume
	source, target string
	subpath        string // of a named volume
	readOnly       bool
}

type volumeMounts []volumeMount

func (v *volumeMounts) UnmarshalYAML(n *yaml.Node) error {
	var entries []yaml.Node
	if err := n.Decode(&entries); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Kind == yaml.ScalarNode {
			parts := strings.Split(e.Value, ":")
			m := volumeMount{source: parts[0], bind: strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/")}
			if len(parts) > 1 {
				m.target = parts[1]
			}
			if len(parts) > 2 {
				m.readOnly = slices.Contains(strings.Split(parts[2], ","), "ro")
			}
			*v = append(*v, m)
			continue
		}
		var long struct {
			Type     string `yaml:"type"`
			Source   string `yaml:"source"`
			Target   string `yaml:"target"`
			ReadOnly bool   `yaml:"read_only"`
			Volume   struct {
				Subpath string `yaml:"subpath"`
			} `yaml:"volume"`
		}
		if err := e.Decode(&long); err != nil {
			return err
		}
		if long.Type != "volume" && long.Type != "bind" {
			return fmt.Errorf("volume of type %q: this test knows volume and bind", long.Type)
		}
		*v = append(*v, volumeMount{bind: long.Type == "bind", source: long.Source, target: long.Target,
			subpath: long.Volume.Subpath, readOnly: long.ReadOnly})
	}
	return nil
}

// find is the mount a path inside the container lies in, and the path's
// rest below the mount's target.
func (v volumeMounts) find(p string) (volumeMount, string, bool) {
	for _, m := range v {
		if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(m.target, "/")+"/"); ok {
			return m, rest, true
		}
		if p == m.target {
			return m, "", true
		}
	}
	return volumeMount{}, "", false
}

// dockerStage is one FROM … AS name section of the Dockerfile.
type dockerStage struct {
	from       string
	body       string   // every instruction after FROM
	copies     []string // destinations of COPY --from
	entrypoint []string
}

// usageFlag is one flag as the binary's -h prints it.
type usageFlag struct{ name, env, def string }

// composeUnit is one compose service with what it runs.
type composeUnit struct {
	name    string
	svc     composeServiceYAML
	program string               // "shindo-ingest", or "shindo sim" for a subcommand
	flags   map[string]usageFlag // by flag name
}

// value is the flag's value in the container: the compose environment's,
// else the binary's default.
func (u *composeUnit) value(flag string) (v string, set bool) {
	f := u.flags[flag]
	if v, ok := u.svc.Environment[f.env]; ok && f.env != "" {
		return v, true
	}
	return f.def, false
}

// listenPort is a port the process listens on, from its *-addr flags.
type listenPort struct {
	flag, proto string
	port        int
}

func (u *composeUnit) listens(t *testing.T) []listenPort {
	t.Helper()
	var out []listenPort
	for _, name := range slices.Sorted(maps.Keys(u.flags)) {
		// Listeners are the *-addr flags, and the URLs a server listens on
		// (etcd's client-url and peer-url).
		if !strings.HasSuffix(name, "-addr") && !(u.program == "shindo etcd" && strings.HasSuffix(name, "-url")) {
			continue
		}
		v, _ := u.value(name)
		if v == "" {
			continue // an optional listener not configured (-http-plain-addr without TLS)
		}
		for _, scheme := range []string{"http://", "https://"} {
			if rest, ok := strings.CutPrefix(v, scheme); ok {
				v = rest
			}
		}
		_, p, err := net.SplitHostPort(v)
		n, perr := strconv.Atoi(p)
		if err != nil || perr != nil {
			t.Fatalf("%s: -%s %q is not host:port", u.name, name, v)
		}
		proto := "tcp"
		if name == "udp-addr" {
			proto = "udp"
		}
		out = append(out, listenPort{name, proto, n})
	}
	return out
}

type composeModel struct {
	units  []*composeUnit // sorted by name
	byName map[string]*composeUnit
	stages map[string]*dockerStage
	goWork string // go.work's go version
	// thirdParty are services running an image of thirdPartyImages;
	// third has their definitions.
	thirdParty []string
	third      map[string]composeServiceYAML
	subnets    []string // of the default network
}

func TestCompose(t *testing.T) {
	t.Parallel()
	m := loadCompose(t)
	checks := []struct {
		name  string
		check func(*testing.T, *composeModel)
	}{
		{"every service binary runs", checkComposeCoversServices},
		{"images come from the Dockerfile", checkComposeImages},
		{"environment names real flags", checkComposeEnv},
		{"required flags are set", checkComposeRequired},
		{"listeners are reachable", checkComposeListeners},
		{"dependencies resolve", checkComposeDeps},
		{"files are mounted read-only", checkComposeFiles},
		{"host ports do not collide", checkComposePorts},
		{"sites", checkComposeSites},
		{"lifecycle", checkComposeLifecycle},
		{"metadata database", checkComposeDatabase},
		{"traces go to the collector", checkComposeTelemetry},
		{"only edges are trusted proxies", checkComposeTrustedProxies},
		{"internal hops are mutual TLS", checkComposeTLS},
		{"docker compose config", checkDockerCompose},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.check(t, m)
		})
	}
}

func loadCompose(t *testing.T) *composeModel {
	t.Helper()
	var doc composeYAML
	b, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(doc.Services) == 0 {
		t.Fatal("docker-compose.yml has no services")
	}
	m := &composeModel{byName: map[string]*composeUnit{}, third: map[string]composeServiceYAML{}, goWork: goWorkVersion(t)}
	for _, c := range doc.Networks["default"].IPAM.Config {
		m.subnets = append(m.subnets, c.Subnet)
	}
	dockerfile := ""
	for _, name := range slices.Sorted(maps.Keys(doc.Services)) {
		svc := doc.Services[name]
		if svc.Build.Target == "" && slices.ContainsFunc(thirdPartyImages, func(p string) bool { return strings.HasPrefix(svc.Image, p) }) {
			m.thirdParty = append(m.thirdParty, name)
			m.third[name] = svc
			continue
		}
		df := filepath.Join(svc.Build.Context, svc.Build.Dockerfile)
		if svc.Build.Dockerfile == "" || svc.Build.Target == "" {
			t.Fatalf("%s: build needs a dockerfile and a target", name)
		}
		if dockerfile != "" && df != dockerfile {
			t.Fatalf("%s: builds from %s, the others from %s", name, df, dockerfile)
		}
		dockerfile = df
		u := &composeUnit{name: name, svc: svc}
		m.units = append(m.units, u)
		m.byName[name] = u
	}
	m.stages = parseDockerfile(t, filepath.Join("..", dockerfile))
	bin := binDir(t)
	for _, u := range m.units {
		st, ok := m.stages[u.svc.Build.Target]
		if !ok {
			t.Fatalf("%s: target %q is not a stage of %s", u.name, u.svc.Build.Target, dockerfile)
		}
		argv := slices.Concat(st.entrypoint, u.svc.Command)
		if len(u.svc.Entrypoint) > 0 {
			argv = slices.Concat(u.svc.Entrypoint, u.svc.Command)
		}
		if len(argv) == 0 {
			t.Fatalf("%s: no entrypoint", u.name)
		}
		for _, a := range argv[1:] {
			if strings.HasPrefix(a, "-") {
				t.Fatalf("%s: argument %q: give options as SHINDO_* environment variables, which this test checks", u.name, a)
			}
		}
		argv[0] = path.Base(argv[0])
		u.program = strings.Join(argv, " ")
		u.flags = usageFlags(t, bin, argv, u.svc.Environment)
	}
	return m
}

func goWorkVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(b)
	if v == nil {
		t.Fatal("go.work has no go line")
	}
	return string(v[1])
}

// parseDockerfile reads the stages: FROM, COPY --from and exec-form
// ENTRYPOINT; other instructions only into body.
func parseDockerfile(t *testing.T, file string) map[string]*dockerStage {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stages := map[string]*dockerStage{}
	var cur *dockerStage
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if strings.EqualFold(f[0], "FROM") {
			if len(f) != 4 || !strings.EqualFold(f[2], "AS") {
				t.Fatalf("%s:%d: want FROM image AS name", file, i+1)
			}
			cur = &dockerStage{from: f[1]}
			stages[strings.ToLower(f[3])] = cur
			continue
		}
		if cur == nil {
			t.Fatalf("%s:%d: instruction before FROM", file, i+1)
		}
		switch strings.ToUpper(f[0]) {
		case "COPY":
			if len(f) > 1 && strings.HasPrefix(f[1], "--from=") {
				cur.copies = append(cur.copies, f[len(f)-1])
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimSpace(line[len(f[0]):])), &cur.entrypoint); err != nil {
				t.Fatalf("%s:%d: ENTRYPOINT must be in exec form: %v", file, i+1, err)
			}
		}
		cur.body += line + "\n"
	}
	return stages
}

var (
	usageFlagLine = regexp.MustCompile(`^  -([a-z0-9-]+)`)
	usageEnv      = regexp.MustCompile(`\(env (SHINDO_[A-Z0-9_]+)\)`)
	usageDefault  = regexp.MustCompile(`\(default (.*)\)$`)
)

// usageFlags runs argv -h in the container's environment (env only, as in
// the image) and parses the flags from the usage. The binary reads the
// environment before -h, so a value of the wrong type fails here, and the
// defaults printed are the values the container runs with.
func usageFlags(t *testing.T, bin string, argv []string, env envVars) map[string]usageFlag {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, argv[0]), append(argv[1:], "-h")...)
	cmd.Env = []string{}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -h: %v\n%s", strings.Join(argv, " "), err, out)
	}
	flags := map[string]usageFlag{}
	var cur string
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\n")
		if m := usageFlagLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
			flags[cur] = usageFlag{name: cur}
			continue
		}
		f, ok := flags[cur]
		if !ok {
			continue
		}
		if m := usageEnv.FindStringSubmatch(line); m != nil {
			f.env = m[1]
		}
		if m := usageDefault.FindStringSubmatch(line); m != nil {
			f.def = m[1]
		}
		flags[cur] = f
	}
	if len(flags) == 0 {
		t.Fatalf("%s -h printed no flags:\n%s", strings.Join(argv, " "), out)
	}
	return flags
}

// checkComposeCoversServices: every svc-* binary, and the simulated fleet,
// runs in some container.
// thirdPartyImages are the images compose may run besides ours: the
// metadata database and the trace collector.
var thirdPartyImages = []string{"postgres:15", "otel/opentelemetry-collector:"}

// checkComposeTelemetry: every service exports its spans to the
// collector, whose configuration is mounted read-only and receives OTLP
// on the port the services are given.
func checkComposeTelemetry(t *testing.T, m *composeModel) {
	if !slices.Contains(m.thirdParty, "otel-collector") {
		t.Fatal("no otel-collector service (image otel/opentelemetry-collector)")
	}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "otel", "collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "endpoint: 0.0.0.0:4317") {
		t.Error("deploy/otel/collector.yaml does not receive OTLP/gRPC on 0.0.0.0:4317")
	}
	for _, u := range m.units {
		if _, ok := u.flags["otlp-endpoint"]; !ok {
			continue
		}
		if v, _ := u.value("otlp-endpoint"); v != "otel-collector:4317" {
			t.Errorf("%s: otlp-endpoint %q, want otel-collector:4317", u.name, v)
		}
	}
}

// checkComposeDatabase: every service that keeps the station registry
// finds it in the metadata database, which it depends on.
func checkComposeDatabase(t *testing.T, m *composeModel) {
	if !slices.Contains(m.thirdParty, "tnn1-postgres") {
		t.Fatal("no tnn1-postgres service (image postgres:15)")
	}
	for _, u := range m.units {
		v, ok := u.value("database-url")
		if !ok {
			continue
		}
		if !strings.HasPrefix(v, "postgres://") || !strings.Contains(v, "@tnn1-postgres:5432/") {
			t.Errorf("%s: database-url %q does not point at tnn1-postgres:5432", u.name, v)
		}
		if !slices.Contains(u.svc.DependsOn.names, "tnn1-postgres") {
			t.Errorf("%s: uses the metadata database but does not depend_on tnn1-postgres", u.name)
		}
	}
}

func checkComposeCoversServices(t *testing.T, m *composeModel) {
	cmds, err := filepath.Glob(filepath.Join("..", "svc-*", "cmd", "*"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join("..", "svc-*"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"shindo sim"}
	for _, dir := range dirs {
		before := len(want)
		for _, c := range cmds {
			if strings.HasPrefix(c, dir+string(filepath.Separator)) {
				want = append(want, filepath.Base(c))
			}
		}
		if len(want) == before {
			t.Errorf("%s has no cmd/<binary>", dir)
		}
	}
	for _, prog := range want {
		if !slices.ContainsFunc(m.units, func(u *composeUnit) bool { return u.program == prog }) {
			t.Errorf("no compose service runs %s", prog)
		}
	}
}

// checkComposeImages: each target's stage copies the binary it runs, the
// build stage builds it, and with a Go at least as new as go.work's.
func checkComposeImages(t *testing.T, m *composeModel) {
	var build *dockerStage
	for _, st := range m.stages {
		if strings.HasPrefix(st.from, "golang:") {
			build = st
		}
	}
	if build == nil {
		t.Fatal("no golang build stage")
	}
	if v := strings.TrimPrefix(build.from, "golang:"); !goAtLeast(v, m.goWork) {
		t.Errorf("build stage uses %s, go.work needs go %s", build.from, m.goWork)
	}
	if !strings.Contains(build.body, "CGO_ENABLED=0") {
		t.Error("build stage must build static binaries (CGO_ENABLED=0)")
	}
	for name, st := range m.stages {
		if len(st.entrypoint) == 0 {
			continue
		}
		if !slices.Contains(st.copies, st.entrypoint[0]) {
			t.Errorf("stage %s runs %s but copies only %v", name, st.entrypoint[0], st.copies)
		}
		if bin := path.Base(st.entrypoint[0]); !strings.Contains(build.body, "/cmd/"+bin+"\n") && !strings.Contains(build.body, "/cmd/"+bin+" ") {
			t.Errorf("stage %s runs %s, which the build stage does not build", name, bin)
		}
	}
}

// goAtLeast compares major.minor versions.
func goAtLeast(have, want string) bool {
	parse := func(v string) (int, int) {
		major, minor, _ := strings.Cut(v, ".")
		minor, _, _ = strings.Cut(minor, ".")
		a, _ := strconv.Atoi(major)
		b, _ := strconv.Atoi(minor)
		return a, b
	}
	ha, hb := parse(have)
	wa, wb := parse(want)
	return ha > wa || ha == wa && hb >= wb
}

func checkComposeEnv(t *testing.T, m *composeModel) {
	for _, u := range m.units {
		known := map[string]bool{}
		for _, f := range u.flags {
			known[f.env] = true
		}
		for _, k := range slices.Sorted(maps.Keys(u.svc.Environment)) {
			if strings.HasPrefix(k, "SHINDO_") && !known[k] {
				t.Errorf("%s: %s is not a flag of %s", u.name, k, u.program)
			}
		}
	}
}

func checkComposeRequired(t *testing.T, m *composeModel) {
	for _, u := range m.units {
		req, ok := composeRequired[u.program]
		if !ok {
			t.Errorf("%s runs %s, which composeRequired does not know: add the flags plan.go passes it", u.name, u.program)
		}
		for _, flag := range req {
			if _, ok := u.flags[flag]; !ok {
				t.Errorf("%s: %s has no flag -%s any more; update composeRequired", u.name, u.program, flag)
				continue
			}
			if v, set := u.value(flag); !set || v == "" {
				t.Errorf("%s: %s is not set", u.name, u.flags[flag].env)
			}
		}
	}
}

// checkComposeListeners: every listener binds all interfaces on a fixed
// port, so other containers and published ports reach it.
func checkComposeListeners(t *testing.T, m *composeModel) {
	for _, u := range m.units {
		for _, l := range u.listens(t) {
			v, _ := u.value(l.flag)
			host, _, _ := net.SplitHostPort(v)
			if host != "" && host != "0.0.0.0" && host != "::" {
				t.Errorf("%s: -%s %s is not reachable from other containers; bind 0.0.0.0", u.name, l.flag, v)
			}
			if l.port == 0 {
				t.Errorf("%s: -%s %s needs a fixed port", u.name, l.flag, v)
			}
		}
	}
}

// checkComposeDeps: every address that names a host names a compose
// service listening there, which the dependent service depends on; the
// known dependencies point at the right program and listener.
func checkComposeDeps(t *testing.T, m *composeModel) {
	for _, u := range m.units {
		for _, k := range slices.Sorted(maps.Keys(u.svc.Environment)) {
			for _, addr := range strings.Split(u.svc.Environment[k], ",") {
				host, p, err := net.SplitHostPort(strings.TrimSpace(addr))
				port, perr := strconv.Atoi(p)
				if err != nil || perr != nil || host == "" || net.ParseIP(host) != nil {
					continue
				}
				if slices.Contains(m.thirdParty, host) {
					continue // checked by the third party's own check
				}
				dep, ok := m.byName[host]
				if !ok {
					t.Errorf("%s: %s=%s names no compose service", u.name, k, addr)
					continue
				}
				if !slices.ContainsFunc(dep.listens(t), func(l listenPort) bool { return l.port == port }) {
					t.Errorf("%s: %s=%s, but %s listens on %v", u.name, k, addr, host, dep.listens(t))
				}
				if !slices.Contains(u.svc.DependsOn.names, host) {
					t.Errorf("%s: uses %s (%s) but does not depend_on it", u.name, host, k)
				}
			}
		}
	}
	for _, d := range composeDeps {
		for _, u := range m.units {
			if u.program != d.program {
				continue
			}
			v, _ := u.value(d.flag)
			for _, addr := range strings.Split(v, ",") {
				if addr = strings.TrimSpace(addr); addr == "" {
					continue
				}
				if u, err := url.Parse(addr); err == nil && u.Scheme != "" && u.Host != "" {
					addr = u.Host // a base URL: its host and port name the service
				}
				host, port, _ := net.SplitHostPort(addr)
				dep, ok := m.byName[host]
				if !ok || dep.program != d.target {
					t.Errorf("%s: -%s %s must name a compose service running %s", u.name, d.flag, addr, d.target)
					continue
				}
				tv, _ := dep.value(d.targetFlag)
				if u, err := url.Parse(tv); err == nil && u.Scheme != "" && u.Host != "" {
					tv = u.Host
				}
				if _, tport, _ := net.SplitHostPort(tv); tport != port {
					t.Errorf("%s: -%s %s, but %s's -%s is %s", u.name, d.flag, addr, host, d.targetFlag, tv)
				}
			}
		}
	}
}

// checkComposeFiles: file flags point into a read-only volume, and a data
// API's -waveform-dir is its svc-waveform's -data-dir, the same volume
// mounted read-only (fdsnws-dataselect reads the day files).
func checkComposeFiles(t *testing.T, m *composeModel) {
	for _, u := range m.units {
		if dir, set := u.value("waveform-dir"); set && u.program == "shindo-dataapi" {
			addr, _ := u.value("waveform")
			host, _, _ := net.SplitHostPort(addr)
			wf, ok := m.byName[host]
			var wfDir string
			if ok {
				wfDir, _ = wf.value("data-dir")
			}
			mine, rest, ok1 := u.svc.Volumes.find(dir)
			theirs, theirRest, ok2 := volumeMount{}, "", false
			if ok {
				theirs, theirRest, ok2 = wf.svc.Volumes.find(wfDir)
			}
			if !ok1 || !ok2 || !mine.readOnly || mine.bind != theirs.bind || mine.source != theirs.source ||
				mine.subpath != theirs.subpath || rest != theirRest {
				t.Errorf("%s: -waveform-dir %s is not a read-only mount of %s's -data-dir %s", u.name, dir, host, wfDir)
			}
		}
		for _, flag := range composeFileFlags {
			v, set := u.value(flag)
			if !set {
				continue
			}
			if mnt, _, ok := u.svc.Volumes.find(v); !ok || !mnt.readOnly {
				t.Errorf("%s: -%s %s is not inside a read-only volume (%v)", u.name, flag, v, u.svc.Volumes)
			}
		}
	}
}

// checkComposePorts: published ports are fixed, free of collisions and
// lead to a listener of the container with the same protocol.
func checkComposePorts(t *testing.T, m *composeModel) {
	owner := map[string]string{}
	for _, u := range m.units {
		listens := u.listens(t)
		for _, spec := range u.svc.Ports {
			hostPort, ctrPort, proto, err := parsePortSpec(spec)
			if err != nil {
				t.Errorf("%s: port %q: %v", u.name, spec, err)
				continue
			}
			key := fmt.Sprintf("%d/%s", hostPort, proto)
			if prev, dup := owner[key]; dup {
				t.Errorf("host port %s published by %s and %s", key, prev, u.name)
			}
			owner[key] = u.name
			if !slices.ContainsFunc(listens, func(l listenPort) bool { return l.port == ctrPort && l.proto == proto }) {
				t.Errorf("%s: publishes %s, but listens on %v", u.name, spec, listens)
			}
		}
	}
}

// parsePortSpec reads compose's short syntax [[ip:]host:]container[/proto]
// with one host port.
func parsePortSpec(spec string) (host, ctr int, proto string, err error) {
	s, proto, ok := strings.Cut(spec, "/")
	if !ok {
		proto = "tcp"
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, "", fmt.Errorf("want [ip:]host:container[/proto]")
	}
	host, err = strconv.Atoi(parts[len(parts)-2])
	if err != nil {
		return 0, 0, "", fmt.Errorf("host port: %w", err)
	}
	ctr, err = strconv.Atoi(parts[len(parts)-1])
	if err != nil {
		return 0, 0, "", fmt.Errorf("container port: %w", err)
	}
	return host, ctr, proto, nil
}

// checkComposeSites: sites are real, and service names start with theirs
// (tnn1-… for TNN-1).
func checkComposeSites(t *testing.T, m *composeModel) {
	for _, u := range m.units {
		if _, ok := u.flags["site"]; !ok {
			continue
		}
		site, _ := u.value("site")
		if !slices.Contains(composeSites, site) {
			t.Errorf("%s: site %q is not one of %v", u.name, site, composeSites)
		}
		if prefix := strings.ToLower(strings.ReplaceAll(site, "-", "")) + "-"; !strings.HasPrefix(u.name, prefix) {
			t.Errorf("%s runs at %s: name it %s…", u.name, site, prefix)
		}
	}
}

// checkComposeLifecycle: containers restart (there are no healthchecks, so
// a service that gave up waiting for a dependency must come back) and get
// longer to stop than their own shutdown bound.
func checkComposeLifecycle(t *testing.T, m *composeModel) {
	// A one-shot job the others wait for (certs) runs again only when it
	// failed: restarted after success it would run for ever.
	oneShot := map[string]bool{}
	for _, u := range m.units {
		for name, cond := range u.svc.DependsOn.condition {
			oneShot[name] = oneShot[name] || cond == "service_completed_successfully"
		}
	}
	for _, u := range m.units {
		switch {
		case oneShot[u.name] && u.svc.Restart != "on-failure":
			t.Errorf("%s: others wait for it to complete, so restart %q must be on-failure", u.name, u.svc.Restart)
		case !oneShot[u.name] && u.svc.Restart != "unless-stopped" && u.svc.Restart != "always":
			t.Errorf("%s: restart %q; want unless-stopped", u.name, u.svc.Restart)
		}
		grace, err := time.ParseDuration(u.svc.StopGracePeriod)
		if err != nil {
			t.Errorf("%s: stop_grace_period %q: %v", u.name, u.svc.StopGracePeriod, err)
			continue
		}
		if _, ok := u.flags["shutdown-timeout"]; !ok {
			continue
		}
		v, _ := u.value("shutdown-timeout")
		if d, err := time.ParseDuration(v); err != nil || grace <= d {
			t.Errorf("%s: stop_grace_period %s must exceed -shutdown-timeout %s", u.name, grace, v)
		}
	}
}

// checkComposeTrustedProxies: a data API believes X-Forwarded-For from the
// edges alone, named by their fixed addresses on the compose network; a
// client reaching it through a published port (NATed from the network's
// gateway) is never trusted.
func checkComposeTrustedProxies(t *testing.T, m *composeModel) {
	var subnets []netip.Prefix
	for _, s := range m.subnets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			t.Fatalf("network default: subnet %q: %v", s, err)
		}
		subnets = append(subnets, p)
	}
	var edges []string
	for _, u := range m.units {
		if u.program != "shindo-edge" {
			continue
		}
		a, err := netip.ParseAddr(u.svc.Networks["default"].IPv4Address)
		if err != nil || !slices.ContainsFunc(subnets, func(p netip.Prefix) bool { return p.Contains(a) }) {
			t.Errorf("%s: ipv4_address %q must be fixed within the default network's subnet %v", u.name, u.svc.Networks["default"].IPv4Address, m.subnets)
			continue
		}
		edges = append(edges, a.String())
	}
	slices.Sort(edges)
	for _, u := range m.units {
		if u.program != "shindo-dataapi" {
			continue
		}
		v, _ := u.value("trusted-proxies")
		got := strings.Split(v, ",")
		slices.Sort(got)
		if !slices.Equal(got, edges) {
			t.Errorf("%s: -trusted-proxies %q, want exactly the edges %q", u.name, v, edges)
		}
	}
}

func checkDockerCompose(t *testing.T, _ *composeModel) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI; the checks above stand in for `docker compose config`")
	}
	if code, _, stderr := runCmd(t, nil, docker, "compose", "version"); code != 0 {
		first, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
		t.Skipf("docker compose is not available (%s); the checks above stand in for `docker compose config -q`", first)
	}
	if code, _, stderr := runCmd(t, nil, docker, "compose", "-f", filepath.Join("..", "docker-compose.yml"), "config", "-q"); code != 0 {
		t.Fatalf("docker compose config -q: exit %d\n%s", code, stderr)
	}
}
