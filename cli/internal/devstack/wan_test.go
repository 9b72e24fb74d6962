package devstack

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"shindo.dev/cli/internal/netprofile"
	"shindo.dev/cli/internal/wan"
)

var testHosts = map[string]string{"TNN-1": "10.77.1.2", "TYO-1": "10.77.2.2", "TPE-1": "10.77.3.2", "KHH-1": "10.77.4.2", "stations": "10.77.5.2"}

// TestWANPlan: with -wan every process binds its site's address, the
// fleet sends to the cores' ingest straight (the network is the link), the
// cores reach each other's NATS straight, the data API trusts the edges'
// addresses, and only the root namespace's ports are checked.
func TestWANPlan(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.WAN, cfg.Links = true, ""
	p := newPlanOn(cfg, testHosts)
	arg := func(pr *process, flag string) string {
		i := slices.Index(pr.args, flag)
		if i < 0 {
			t.Fatalf("%s has no %s: %q", pr.name, flag, pr.args)
		}
		return pr.args[i+1]
	}
	for _, pr := range p.processes() {
		want := testHosts[pr.wanSite()]
		for kind, l := range pr.listeners {
			if !strings.Contains(l, want+":") {
				t.Errorf("%s %s listens at %s, not at %s", pr.name, kind, l, want)
			}
		}
		switch pr.role {
		case "fleet":
			if got := arg(pr, "-primary"); got != "10.77.1.2:17000" {
				t.Errorf("fleet -primary %s", got)
			}
			if got := arg(pr, "-backup-ws"); got != "ws://10.77.2.2:17101/v1/station/ws" {
				t.Errorf("fleet -backup-ws %s", got)
			}
		case "ingest":
			want := map[string]string{"TNN-1": "nats://10.77.2.2:17150", "TYO-1": "nats://10.77.1.2:17050"}[pr.site]
			if got := arg(pr, "-peer-nats"); got != want {
				t.Errorf("%s -peer-nats %s, want %s", pr.name, got, want)
			}
		case "dataapi":
			if got := arg(pr, "-trusted-proxies"); got != "10.77.3.2,10.77.4.2" {
				t.Errorf("%s -trusted-proxies %s", pr.name, got)
			}
		}
	}
	if !strings.Contains(p.databaseURL, "@10.77.1.2:17040/") {
		t.Errorf("database URL %s is not at TNN-1", p.databaseURL)
	}
	if len(p.links) != 0 {
		t.Errorf("proxied links under -wan: %v", p.links)
	}
	var ports []int
	for _, pt := range p.ports {
		ports = append(ports, pt.n)
	}
	if slices.Sort(ports); !slices.Equal(ports, []int{17040, 17950}) {
		t.Errorf("ports checked: %v, want the database's and the control API's", ports)
	}
	if p.control != "127.0.0.1:17950" {
		t.Errorf("control API at %s", p.control)
	}
	if got := cfg.linksProfile(); got != netprofile.WAN {
		t.Errorf("default profile under -wan: %s", got)
	}
	cfg.WAN = false
	if got := cfg.linksProfile(); got != netprofile.Clear {
		t.Errorf("default profile on loopback: %s", got)
	}
}

// TestWANHAPlan: with -wan and -ha each core's HAProxy listens at its
// core's address, the services reach the database there, and the members
// trust the sites' network besides loopback.
func TestWANHAPlan(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.WAN, cfg.HA = true, true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	hosts := map[string]string{"TNN-1": "10.77.1.2", "TYO-1": "10.77.2.2", "TPE-1": "10.77.3.2", "KHH-1": "10.77.4.2", stationsSite: "10.77.5.2"}
	p := newPlanOn(cfg, hosts)
	for _, pr := range p.processes() {
		if i := slices.Index(pr.args, "-database-url"); i >= 0 {
			block := map[string]int{"TNN-1": 0, "TYO-1": 100}[pr.site]
			if want := hostPort(hosts[pr.site], cfg.PortBase+block+haproxyPort); !strings.Contains(pr.args[i+1], want) {
				t.Errorf("%s: -database-url %s, want its core's HAProxy %s", pr.name, pr.args[i+1], want)
			}
		}
	}
	if got := p.trustedNets(); !slices.Equal(got, []string{"127.0.0.1/32", "10.77.0.0/16"}) {
		t.Errorf("trusted %v", got)
	}
	m := p.ha.members["TYO-1"]
	doc := patroniConfig("TYO-1", m, p.ha.etcdHosts, "/bin", "/tmp/x", p.trustedNets())
	for _, want := range []string{"host replication postgres 10.77.0.0/16 trust", "host all all 127.0.0.1/32 trust", "listen: 10.77.2.2:"} {
		if !strings.Contains(doc, want) {
			t.Errorf("Patroni configuration lacks %q:\n%s", want, doc)
		}
	}
	if h := p.haproxyConfig("TYO-1"); !strings.Contains(h, "bind "+hostPort("10.77.2.2", cfg.PortBase+100+haproxyPort)) {
		t.Errorf("TYO-1's HAProxy does not listen at its core:\n%s", h)
	}
}

// TestWANStack builds the namespaces, where this machine allows, and
// checks what the control API shows of them: every link of the topology
// impairable, the edges' too, with its ends' namespaces and addresses.
func TestWANStack(t *testing.T) {
	if err := wan.Check(); err != nil {
		t.Skip(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, hosts, err := buildWAN(log)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cfg := testConfig()
	cfg.WAN, cfg.Links = true, ""
	st := newStack(t.Context(), cfg, newPlanOn(cfg, hosts), log, t.TempDir())
	st.wan = n
	if err := st.openLinks(cfg.linksProfile()); err != nil {
		t.Fatal(err)
	}
	defer st.closeLinks()
	if got, want := st.linkNames(), len(netprofile.Links()); len(got) != want {
		t.Fatalf("links %v, want all %d", got, want)
	}
	l := st.link("uplink-TNN-1").state(true)
	if l.Profile != netprofile.WAN || l.UDP != hosts["TNN-1"]+":17000" || l.Netns["stations"] == "" || l.Address["TNN-1"] != hosts["TNN-1"] {
		t.Fatalf("uplink-TNN-1: %+v", l)
	}
	if st.isPartitioned() {
		t.Fatal("partitioned at start")
	}
	if _, err := st.setLink("intersite", netprofile.Cut); err != nil {
		t.Fatal(err)
	}
	if !st.isPartitioned() {
		t.Fatal("intersite cut, not partitioned")
	}
	if _, err := st.setLink("edge-KHH-1-TYO-1", "lossy"); err != nil {
		t.Fatalf("edge links are impairable under -wan: %v", err)
	}
}
