package devstack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"shindo.dev/cli/internal/netprofile"
	"shindo.dev/devkit/faultproxy"
)

// TestFleetSendsThroughLinks: the fleet's uplinks are the uplink proxies,
// which front each core's ingest, on the planned ports; the link between
// the cores fronts each core's NATS for its peer.
func TestFleetSendsThroughLinks(t *testing.T) {
	t.Parallel()
	p := newPlan(testConfig())
	fleet := p.groups[len(p.groups)-1][0]
	arg := func(flag string) string {
		i := slices.Index(fleet.args, flag)
		if i < 0 {
			t.Fatalf("fleet has no %s: %q", flag, fleet.args)
		}
		return fleet.args[i+1]
	}
	for flag, want := range map[string]string{
		"-primary": "127.0.0.1:17070", "-primary-ws": "ws://127.0.0.1:17071/v1/station/ws",
		"-backup": "127.0.0.1:17170", "-backup-ws": "ws://127.0.0.1:17171/v1/station/ws",
	} {
		if got := arg(flag); got != want {
			t.Errorf("fleet %s %s, want %s", flag, got, want)
		}
	}
	var names []string
	for _, l := range p.links {
		names = append(names, l.link.Name)
	}
	if strings.Join(names, ",") != "uplink-TNN-1,uplink-TYO-1,intersite" {
		t.Fatalf("links %v", names)
	}
	want := map[string]proxyPlan{
		"uplink-TNN-1 udp": {role: "udp", site: "TNN-1", udp: true, listen: "127.0.0.1:17070", target: "127.0.0.1:17000", forwardUp: true},
		"uplink-TNN-1 ws":  {role: "ws", site: "TNN-1", listen: "127.0.0.1:17071", target: "127.0.0.1:17001", forwardUp: true},
		"uplink-TYO-1 udp": {role: "udp", site: "TYO-1", udp: true, listen: "127.0.0.1:17170", target: "127.0.0.1:17100", forwardUp: true},
		"uplink-TYO-1 ws":  {role: "ws", site: "TYO-1", listen: "127.0.0.1:17171", target: "127.0.0.1:17101", forwardUp: true},
		// TYO-1 reaches TNN-1's NATS here: its upstream is TYO-1 → TNN-1,
		// the link's back direction.
		"intersite nats TNN-1": {role: "nats", site: "TNN-1", listen: "127.0.0.1:17052", target: "127.0.0.1:17050"},
		"intersite nats TYO-1": {role: "nats", site: "TYO-1", listen: "127.0.0.1:17152", target: "127.0.0.1:17150", forwardUp: true},
	}
	n := 0
	for _, l := range p.links {
		for _, pp := range l.proxies {
			key := l.link.Name + " " + pp.role
			if pp.role == "nats" {
				key += " " + pp.site
			}
			if w, ok := want[key]; !ok || w != pp {
				t.Errorf("%s: %+v, want %+v", key, pp, w)
			}
			n++
		}
	}
	if n != len(want) {
		t.Errorf("%d proxies, want %d", n, len(want))
	}
	// The ingest peers still reach each other's NATS through the link.
	for _, pr := range p.processes() {
		if pr.role == "ingest" {
			i := slices.Index(pr.args, "-peer-nats")
			if peer := map[string]string{"TNN-1": "nats://127.0.0.1:17152", "TYO-1": "nats://127.0.0.1:17052"}[pr.site]; pr.args[i+1] != peer {
				t.Errorf("%s -peer-nats %s, want %s", pr.name, pr.args[i+1], peer)
			}
		}
	}
}

// testStack runs the plan's links with every proxy on a port of its own
// choosing, the uplinks' UDP in front of an echo server, and serves the
// control API.
func testStack(t *testing.T, links string) (*stack, *httptest.Server, *net.UDPConn) {
	t.Helper()
	cfg := testConfig()
	cfg.Links = links
	p := newPlan(cfg)
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			echo.WriteToUDP(buf[:n], from)
		}
	}()
	for i := range p.links {
		for j := range p.links[i].proxies {
			pp := &p.links[i].proxies[j]
			pp.listen = "127.0.0.1:0"
			if pp.udp {
				pp.target = echo.LocalAddr().String()
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := newStack(ctx, cfg, p, slog.New(slog.NewTextHandler(io.Discard, nil)), t.TempDir())
	s.setEndpoints(func() error { return nil })
	if err := s.openLinks(cfg.Links); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.controlMux(ctx))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		s.closeLinks()
	})
	return s, srv, echo
}

func post(t *testing.T, url, contentType, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp.StatusCode, doc
}

// TestLinkControl: degrade, cut and heal set both directions of every
// proxy of a link, whichever way the profile is named; unknown links,
// profiles and actions are refused with the valid names; the partition
// routes are the link between the cores' cut and heal.
func TestLinkControl(t *testing.T) {
	t.Parallel()
	s, srv, _ := testStack(t, "clear")
	tnn := s.link("uplink-TNN-1")
	imps := func(l *netLink) []faultproxy.Impairment {
		var out []faultproxy.Impairment
		for _, p := range l.proxies {
			if p.udp != nil {
				out = append(out, p.udp.Impairment(faultproxy.Upstream), p.udp.Impairment(faultproxy.Downstream))
			} else {
				out = append(out, p.tcp.Impairment(faultproxy.Upstream), p.tcp.Impairment(faultproxy.Downstream))
			}
		}
		return out
	}
	all := func(l *netLink, want faultproxy.Impairment) {
		t.Helper()
		for i, imp := range imps(l) {
			if imp != want {
				t.Errorf("%s proxy %d direction %d: %+v, want %+v", l.plan.link.Name, i/2, i%2, imp, want)
			}
		}
	}
	all(tnn, faultproxy.Impairment{})

	lossy := faultproxy.Impairment{Delay: 8 * time.Millisecond, Jitter: 2 * time.Millisecond, Drop: 0.05}
	for _, tc := range []struct{ how, url, contentType, body string }{
		{"query", "/v1/links/uplink-TNN-1/degrade?profile=lossy", "", ""},
		{"form", "/v1/links/uplink-TNN-1/degrade", "application/x-www-form-urlencoded", "profile=lossy"},
		{"json", "/v1/links/uplink-TNN-1/degrade", "application/json", `{"profile":"lossy"}`},
	} {
		s.setLink("uplink-TNN-1", netprofile.Clear)
		code, doc := post(t, srv.URL+tc.url, tc.contentType, tc.body)
		if code != http.StatusOK || doc["profile"] != "lossy" || doc["name"] != "uplink-TNN-1" {
			t.Fatalf("%s: %d %v", tc.how, code, doc)
		}
		all(tnn, lossy)
	}
	all(s.link("uplink-TYO-1"), faultproxy.Impairment{})

	code, doc := post(t, srv.URL+"/v1/links/uplink-TNN-1/cut", "", "")
	if code != http.StatusOK || doc["profile"] != "cut" {
		t.Fatalf("cut: %d %v", code, doc)
	}
	all(tnn, faultproxy.Impairment{Blackhole: true})
	if code, doc = post(t, srv.URL+"/v1/links/uplink-TNN-1/heal", "", ""); code != http.StatusOK || doc["profile"] != "clear" {
		t.Fatalf("heal: %d %v", code, doc)
	}
	all(tnn, faultproxy.Impairment{})

	for _, tc := range []struct {
		url  string
		code int
		want string
	}{
		{"/v1/links/uplink-KHH-1/cut", 404, `unknown link "uplink-KHH-1": links are uplink-TNN-1, uplink-TYO-1, intersite`},
		{"/v1/links/edge-TPE-1-TNN-1/cut", 404, "link edge-TPE-1-TNN-1 (TPE-1 ↔ TNN-1) is not impairable on loopback yet: the edges reach the cores directly; links are uplink-TNN-1"},
		{"/v1/links/uplink-TNN-1/degrade?profile=monsoon", 400, `unknown profile "monsoon": profiles are clear, wan, lossy, typhoon, cut`},
		{"/v1/links/uplink-TNN-1/degrade", 400, "degrade needs a profile (profile=NAME): profiles are clear, wan"},
		{"/v1/links/uplink-TNN-1/explode", 400, "want degrade, cut or heal"},
	} {
		code, doc := post(t, srv.URL+tc.url, "", "")
		if code != tc.code || !strings.Contains(doc["error"].(string), tc.want) {
			t.Errorf("%s: %d %v, want %d %q", tc.url, code, doc, tc.code, tc.want)
		}
	}
	all(tnn, faultproxy.Impairment{})

	// The partition routes act on the link between the cores.
	if code, doc = post(t, srv.URL+"/v1/intersite/partition", "", ""); code != http.StatusOK || doc["partitioned"] != true {
		t.Fatalf("partition: %d %v", code, doc)
	}
	all(s.link("intersite"), faultproxy.Impairment{Blackhole: true})
	resp, err := http.Get(srv.URL + "/v1/processes")
	if err != nil {
		t.Fatal(err)
	}
	var ps struct{ Partitioned bool }
	json.NewDecoder(resp.Body).Decode(&ps)
	resp.Body.Close()
	if !ps.Partitioned || !s.isPartitioned() {
		t.Error("processes do not show the partition")
	}
	if code, doc = post(t, srv.URL+"/v1/links/intersite/heal", "", ""); code != http.StatusOK || s.isPartitioned() {
		t.Fatalf("heal intersite: %d %v", code, doc)
	}
	all(s.link("intersite"), faultproxy.Impairment{})
}

// TestLinkDirections: a profile's forward shape goes upstream on a proxy
// whose clients are at the link's From end and downstream on one whose
// clients are at its To end.
func TestLinkDirections(t *testing.T) {
	t.Parallel()
	s, _, _ := testStack(t, "clear")
	fwd, back := netprofile.Shape{Delay: time.Millisecond}, netprofile.Shape{Delay: 2 * time.Millisecond}
	asym := netprofile.Phase{Name: "asym", Forward: fwd, Back: back}
	l := s.link("intersite")
	l.apply(asym)
	for _, p := range l.proxies {
		up, down := p.tcp.Impairment(faultproxy.Upstream), p.tcp.Impairment(faultproxy.Downstream)
		want := map[string][2]time.Duration{"TNN-1": {2 * time.Millisecond, time.Millisecond}, "TYO-1": {time.Millisecond, 2 * time.Millisecond}}[p.plan.site]
		if up.Delay != want[0] || down.Delay != want[1] {
			t.Errorf("%s's NATS proxy: up %s down %s, want %s and %s", p.plan.site, up.Delay, down.Delay, want[0], want[1])
		}
	}
	u := s.link("uplink-TYO-1")
	u.apply(asym)
	for _, p := range u.proxies {
		var up faultproxy.Impairment
		if p.udp != nil {
			up = p.udp.Impairment(faultproxy.Upstream)
		} else {
			up = p.tcp.Impairment(faultproxy.Upstream)
		}
		if up.Delay != time.Millisecond {
			t.Errorf("uplink %s proxy: stations' packets delayed %s, want the forward 1ms", p.plan.role, up.Delay)
		}
	}
}

// TestLinksAtStartAndInEndpoints: -links puts every link under a profile
// from the start; endpoints.json lists each by name with its proxies'
// addresses and profile, and GET /v1/links adds the phase and counters and
// names the links that cannot be impaired.
func TestLinksAtStartAndInEndpoints(t *testing.T) {
	t.Parallel()
	s, srv, _ := testStack(t, "typhoon")
	b, err := json.Marshal(s.linksDoc())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc) != 3 {
		t.Fatalf("links %s", b)
	}
	up := doc["uplink-TNN-1"]
	for k, want := range map[string]any{"name": "uplink-TNN-1", "kind": "uplink", "from": "stations", "to": "TNN-1", "profile": "typhoon",
		"target_ws": "ws://127.0.0.1:17001/v1/station/ws"} {
		if up[k] != want {
			t.Errorf("uplink-TNN-1 %s = %v, want %v", k, up[k], want)
		}
	}
	if ws, _ := up["ws"].(string); !strings.HasPrefix(ws, "ws://127.0.0.1:") || !strings.HasSuffix(ws, "/v1/station/ws") {
		t.Errorf("uplink ws %v", up["ws"])
	}
	if _, ok := up["phase"]; ok {
		t.Error("endpoints.json shows the phase, which changes without a rewrite")
	}
	if _, err := time.Parse(time.RFC3339Nano, up["since"].(string)); err != nil {
		t.Errorf("since: %v", err)
	}
	nats, _ := doc["intersite"]["nats"].(map[string]any)
	if len(nats) != 2 || !strings.HasPrefix(nats["TNN-1"].(string), "nats://127.0.0.1:") || doc["intersite"]["udp"] != nil {
		t.Errorf("intersite %v", doc["intersite"])
	}

	resp, err := http.Get(srv.URL + "/v1/links")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Links        []LinkState
		Unimpairable []UnimpairableLink
		Profiles     []ProfileInfo
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Links) != 3 || len(list.Unimpairable) != 4 || len(list.Profiles) != len(netprofile.Profiles()) {
		t.Fatalf("list %+v", list)
	}
	for _, l := range list.Links {
		if l.Profile != "typhoon" || l.Phase != "rain" || l.Stats == nil {
			t.Errorf("%s: %+v", l.Name, l)
		}
	}
}

// TestUplinkProxyCarries: an uplink's UDP proxy carries datagrams both
// ways until the link is cut, and counts them.
func TestUplinkProxyCarries(t *testing.T) {
	t.Parallel()
	s, _, _ := testStack(t, "clear")
	l := s.link("uplink-TYO-1")
	c, err := net.Dial("udp", l.proxies[0].udp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func() bool {
		c.Write([]byte("ping"))
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 16)
		n, err := c.Read(buf)
		return err == nil && string(buf[:n]) == "ping"
	}
	if !roundTrip() {
		t.Fatal("no echo through the clear link")
	}
	s.setLink("uplink-TYO-1", netprofile.Cut)
	if roundTrip() {
		t.Fatal("echo through the cut link")
	}
	st := l.state(true).Stats
	if st.Forward.Datagrams != 2 || st.Forward.Dropped != 1 || st.Back.Datagrams != 1 {
		t.Errorf("stats %+v", st)
	}
	s.setLink("uplink-TYO-1", netprofile.Clear)
	if !roundTrip() {
		t.Fatal("no echo after heal")
	}
}
