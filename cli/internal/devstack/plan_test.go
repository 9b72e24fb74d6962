package devstack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"shindo.dev/cli/internal/provision"
	"shindo.dev/lib/peerid"
	"shindo.dev/lib/registry"
)

func testConfig() Config {
	return Config{Stations: 60, Simulate: true, Dir: "var/dev", BinDir: "/opt/shindo", Host: "127.0.0.1", PortBase: 17000,
		ReadyTimeout: time.Second, StopTimeout: time.Second, LogLevel: "info", Links: "clear"}
}

func TestPortsUniqueAndInSpan(t *testing.T) {
	t.Parallel()
	p := newPlan(testConfig())
	seen := map[int]string{}
	for _, pt := range p.ports {
		if other, dup := seen[pt.n]; dup {
			t.Errorf("port %d used by %s and %s", pt.n, other, pt.what)
		}
		seen[pt.n] = pt.what
		if pt.n < 17000 || pt.n >= 17000+portSpan {
			t.Errorf("%s port %d outside the span", pt.what, pt.n)
		}
	}
}

// TestProcessesUsePlannedPorts: every address a process is told to listen
// on, or to reach, is in the port plan, so endpoints.json and the processes
// agree.
func TestProcessesUsePlannedPorts(t *testing.T) {
	t.Parallel()
	p := newPlan(testConfig())
	planned := map[string]bool{}
	for _, pt := range p.ports {
		planned[hostPort("127.0.0.1", pt.n)] = true
	}
	for _, g := range p.groups {
		for _, pr := range g {
			for _, arg := range pr.args {
				for _, a := range strings.Split(arg, ",") {
					a = strings.TrimPrefix(strings.TrimPrefix(a, "ws://"), "http://")
					a, _, _ = strings.Cut(a, "/")
					if strings.HasPrefix(a, "127.0.0.1:") && !planned[a] {
						t.Errorf("%s uses %s, not in the plan", pr.name, a)
					}
				}
			}
			if !strings.HasPrefix(pr.bin, "/opt/shindo/shindo") {
				t.Errorf("%s runs %s", pr.name, pr.bin)
			}
		}
	}
}

// TestArchiveOverGRPC: each core's data API reaches its own core's
// archive at the archive's gRPC address, and the archive has no HTTP
// listener (its REST routes are the data API's; its SeedLink port serves
// WebSocket only as SeedLink's).
func TestArchiveOverGRPC(t *testing.T) {
	t.Parallel()
	p := newPlan(testConfig())
	procs := map[string]*process{}
	for _, g := range p.groups {
		for _, pr := range g {
			procs[pr.name] = pr
		}
	}
	for _, site := range []string{"TNN-1", "TYO-1"} {
		wf, data := procs[site+"-waveform"], procs[site+"-dataapi"]
		if wf == nil || data == nil {
			t.Fatalf("%s: no waveform or dataapi process", site)
		}
		if i := slices.Index(data.args, "-waveform"); i < 0 || i+1 == len(data.args) || data.args[i+1] != wf.listeners["grpc"] {
			t.Errorf("%s dataapi args %v: want -waveform %s", site, data.args, wf.listeners["grpc"])
		}
		if _, ok := wf.listeners["http"]; ok || slices.Contains(wf.args, "-http-addr") {
			t.Errorf("%s waveform still has an HTTP listener: %v %v", site, wf.listeners, wf.args)
		}
	}
	for _, pt := range p.ports {
		if strings.Contains(pt.what, "waveform") && !strings.HasSuffix(pt.what, " gRPC") && !strings.HasSuffix(pt.what, " admin") && !strings.HasSuffix(pt.what, " SeedLink") {
			t.Errorf("port %d for %s", pt.n, pt.what)
		}
	}
}

func TestEndpointsDocument(t *testing.T) {
	t.Parallel()
	p := newPlan(testConfig())
	b, err := json.Marshal(p.endpoints(func(*process) int { return 42 }))
	if err != nil {
		t.Fatal(err)
	}
	var loose map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &loose); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]string{
		"TNN-1": {
			"ingest":   {"udp", "ws", "grpc", "admin", "pid"},
			"rts":      {"grpc", "admin", "pid"},
			"waveform": {"grpc", "admin", "seedlink", "pid"},
			"dataapi":  {"http", "grpc", "admin", "pid"},
		},
		"TYO-1": {
			"ingest":   {"udp", "ws", "grpc", "admin", "pid"},
			"rts":      {"grpc", "admin", "pid"},
			"waveform": {"grpc", "admin", "seedlink", "pid"},
			"dataapi":  {"http", "grpc", "admin", "pid"},
		},
		"TPE-1": {"edge": {"http", "grpc", "admin", "pid"}},
	}
	for site, svcs := range want {
		for svc, keys := range svcs {
			var m map[string]any
			if err := json.Unmarshal(loose[site][svc], &m); err != nil {
				t.Fatalf("%s %s: %v", site, svc, err)
			}
			for _, k := range keys {
				if _, ok := m[k]; !ok {
					t.Errorf("%s %s lacks %q", site, svc, k)
				}
			}
		}
	}
	var ingest map[string]any
	json.Unmarshal(loose["TNN-1"]["ingest"], &ingest)
	if ingest["ws"] != "ws://127.0.0.1:17001/v1/station/ws" || ingest["udp"] != "127.0.0.1:17000" {
		t.Errorf("ingest %v", ingest)
	}
	json.Unmarshal(loose["TYO-1"]["ingest"], &ingest)
	if ingest["udp"] != "127.0.0.1:17100" {
		t.Errorf("TYO-1 ingest %v", ingest)
	}
	var fleet map[string]any
	var top map[string]json.RawMessage
	json.Unmarshal(b, &top)
	if err := json.Unmarshal(top["fleet"], &fleet); err != nil || fleet["stations"] != float64(60) {
		t.Errorf("fleet entry %s", top["fleet"])
	}
}

func TestProvision(t *testing.T) {
	t.Parallel()
	stations := provision.Fleet("SIM", 200)
	for i, st := range stations { // the keys come from the data API; any do here
		st.KeyID, st.KeyHex = 1, fmt.Sprintf("%032x", i+1)
	}
	b, _ := json.Marshal(stations)
	set, err := registry.Parse(b)
	if err != nil {
		t.Fatalf("provisioned stations do not load: %v", err)
	}
	if set.Len() != 200 {
		t.Fatalf("%d stations", set.Len())
	}
	for _, s := range set.All() {
		if s.Lat < 21.8 || s.Lat > 25.5 || s.Lon < 118 || s.Lon > 122.2 || s.Code == 0 {
			t.Errorf("%s at %.3f,%.3f code %d", s.ID, s.Lat, s.Lon, s.Code)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	c := testConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Stations, c.PortBase, c.Host, c.Links, c.Scenario, c.Motion = 0, 65000, "::zz", "monsoon", "atlantis", "nga"
	err := c.Validate()
	for _, want := range []string{"stations", "port-base", "not an IP", "links: unknown profile \"monsoon\": profiles are clear, wan",
		"scenario: unknown scenario \"atlantis\"", "unknown ground-motion model \"nga\""} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestNoSecretsInArgv: the admin and notification tokens reach the services
// as files named in the environment, since every local user can read a
// command line; the data APIs trust X-Forwarded-For from the edges' address
// alone.
func TestNoSecretsInArgv(t *testing.T) {
	t.Parallel()
	p := newPlan(testConfig())
	secretFlags := []string{"-admin-tokens", "-notify-tokens", "-admin-token", "-key-hex"}
	want := map[string]string{
		"dataapi": "SHINDO_DATAAPI_ADMIN_TOKENS_FILE=" + p.tokenFile,
		"edge":    "SHINDO_EDGE_NOTIFY_TOKENS_FILE=" + p.notifyTokenFile,
	}
	for _, pr := range p.processes() {
		for _, a := range pr.args {
			if slices.Contains(secretFlags, a) {
				t.Errorf("%s: %s on the command line", pr.name, a)
			}
		}
		if w, ok := want[pr.role]; ok && !slices.Contains(pr.env, w) {
			t.Errorf("%s: environment %q, want %s", pr.name, pr.env, w)
		}
		if pr.role == "dataapi" {
			i := slices.Index(pr.args, "-trusted-proxies")
			if i < 0 || pr.args[i+1] != "127.0.0.1" {
				t.Errorf("%s: args %q, want -trusted-proxies 127.0.0.1", pr.name, pr.args)
			}
		}
	}
	for host, want := range map[string]string{"0.0.0.0": "127.0.0.1,::1", "localhost": "127.0.0.1,::1", "10.1.2.3": "10.1.2.3", "::": "127.0.0.1,::1"} {
		if got := edgeSource(host); got != want {
			t.Errorf("edgeSource(%q) = %q, want %q", host, got, want)
		}
	}
}

// TestOTelEndpointToEveryService: with -otel every service exports its
// spans there, and each ingest traces packets at -trace-every; without,
// no service is given an endpoint.
func TestOTelEndpointToEveryService(t *testing.T) {
	t.Parallel()
	c := testConfig()
	c.OTel, c.TraceEvery = "127.0.0.1:4317", 7
	for _, pr := range slices.Concat(newPlan(c).groups...) {
		if !slices.Contains(binaries, strings.TrimPrefix(pr.bin, "/opt/shindo/")) {
			continue // shindo's own subcommands: etcd, nats, the fleet
		}
		if i := slices.Index(pr.args, "-otlp-endpoint"); i < 0 || pr.args[i+1] != "127.0.0.1:4317" {
			t.Errorf("%s args %v lack -otlp-endpoint 127.0.0.1:4317", pr.name, pr.args)
		}
		if pr.role == "ingest" {
			if i := slices.Index(pr.args, "-trace-every"); i < 0 || pr.args[i+1] != "7" {
				t.Errorf("%s args %v lack -trace-every 7", pr.name, pr.args)
			}
		}
	}
	for _, pr := range slices.Concat(newPlan(testConfig()).groups...) {
		if slices.Contains(pr.args, "-otlp-endpoint") {
			t.Errorf("%s is given an OTLP endpoint without -otel", pr.name)
		}
	}
	c.OTel = "collector"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "otel") {
		t.Errorf("otel without a port: %v", err)
	}
}

// TestTLSPlan: with -tls the edges serve HTTPS on their HTTP port with a
// certificate of their own and redirect from a plain port beside it, the
// stations' WebSocket URLs are wss:// to ingests serving certificates for
// their addresses, and the fleet trusts the dev CA for both and for time
// sync; without -tls nothing of it.
func TestTLSPlan(t *testing.T) {
	t.Parallel()
	arg := func(pr *process, flag string) string {
		if i := slices.Index(pr.args, flag); i >= 0 && i+1 < len(pr.args) {
			return pr.args[i+1]
		}
		return ""
	}
	for _, on := range []bool{false, true} {
		cfg := testConfig()
		cfg.TLS = on
		p := newPlan(cfg)
		procs := map[string]*process{}
		for _, g := range p.groups {
			for _, pr := range g {
				procs[pr.name] = pr
			}
		}
		if !on {
			if len(p.certs) != 0 || strings.HasPrefix(procs["TPE-1-edge"].listeners["http"], "https") || arg(procs["fleet"], "-ca-file") != "" {
				t.Errorf("TLS without -tls: %d certificates, %v", len(p.certs), procs["TPE-1-edge"].listeners)
			}
			continue
		}
		issued := map[string]certPlan{}
		for _, c := range p.certs {
			issued[c.certFile] = c
		}
		for _, e := range []string{"TPE-1", "KHH-1"} {
			edge := procs[e+"-edge"]
			c, ok := issued[arg(edge, "-tls-cert")]
			if !ok || c.site != e || c.role != "edge" || !slices.Contains(c.hosts, cfg.Host) || arg(edge, "-tls-key") != c.keyFile {
				t.Errorf("%s: -tls-cert %q not a certificate issued for it: %+v", e, arg(edge, "-tls-cert"), c)
			}
			if https := "https://" + arg(edge, "-http-addr"); edge.listeners["http"] != https || arg(edge, "-http-plain-addr") == "" {
				t.Errorf("%s listeners %v, args %v", e, edge.listeners, edge.args)
			}
			for _, u := range strings.Split(arg(edge, "-entrances"), ",") {
				if !strings.HasPrefix(u, "https://") {
					t.Errorf("%s entrance %s", e, u)
				}
			}
		}
		for _, core := range []string{"TNN-1", "TYO-1"} {
			ing := procs[core+"-ingest"]
			if c, ok := issued[arg(ing, "-ws-tls-cert")]; !ok || c.role != "ingest" || c.site != core {
				t.Errorf("%s ingest: -ws-tls-cert %q", core, arg(ing, "-ws-tls-cert"))
			}
			if !strings.HasPrefix(ing.listeners["ws"], "wss://") {
				t.Errorf("%s ws %s", core, ing.listeners["ws"])
			}
		}
		fleet := procs["fleet"]
		if arg(fleet, "-ca-file") != p.caFile || !strings.HasPrefix(arg(fleet, "-time-url"), "https://") ||
			!strings.HasPrefix(arg(fleet, "-primary-ws"), "wss://") || !strings.HasPrefix(arg(fleet, "-backup-ws"), "wss://") {
			t.Errorf("fleet args %v", fleet.args)
		}
		if s := strings.Join(p.summary(), "\n"); !strings.Contains(s, "--cacert "+p.caFile) {
			t.Errorf("the summary shows no curl with the CA:\n%s", s)
		}
		// The internal hops: every service's gRPC, every NATS server and
		// etcd member, each with the certificate of its own site and
		// role, and the tools' operator certificate.
		for _, pr := range procs {
			var certFlag, role string
			switch {
			case slices.Contains(binaries, "shindo-"+pr.role):
				certFlag, role = "-mtls-cert", pr.role
				if arg(pr, "-mtls-ca") != p.caFile {
					t.Errorf("%s: -mtls-ca %q", pr.name, arg(pr, "-mtls-ca"))
				}
			case pr.role == "nats" || pr.role == "etcd":
				certFlag, role = "-tls-cert", pr.role
				if arg(pr, "-tls-ca") != p.caFile {
					t.Errorf("%s: -tls-ca %q", pr.name, arg(pr, "-tls-ca"))
				}
			default:
				continue
			}
			if c, ok := issued[arg(pr, certFlag)]; !ok || c.site != pr.site || c.role != role {
				t.Errorf("%s: %s %q is not a certificate of %s/%s", pr.name, certFlag, arg(pr, certFlag), pr.site, role)
			}
			if pr.role == "etcd" && (!strings.HasPrefix(arg(pr, "-client-url"), "https://") || !strings.HasPrefix(arg(pr, "-peer-url"), "https://") ||
				!strings.HasPrefix(pr.readyURL, "http://"+strings.TrimPrefix(arg(pr, "-metrics-url"), "http://"))) {
				t.Errorf("%s: client %s, peer %s, ready at %s", pr.name, arg(pr, "-client-url"), arg(pr, "-peer-url"), pr.readyURL)
			}
		}
		if c, ok := issued[p.operatorCert]; !ok || c.role != peerid.Operator || c.keyFile != p.operatorKey {
			t.Errorf("operator certificate %q: %+v", p.operatorCert, c)
		}
	}
}
