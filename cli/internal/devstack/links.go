package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"shindo.dev/cli/internal/netprofile"
	"shindo.dev/cli/internal/wan"
	"shindo.dev/devkit/faultproxy"
)

// The network links of the topology that run through in-process proxies
// (devkit/faultproxy), so the control API can put them under a profile of
// cli/internal/netprofile: each uplink is a UDP proxy in front of its
// core's ingest UDP and a TCP proxy in front of its WebSocket listener,
// which the fleet sends through; the link between the cores is a TCP proxy
// in front of each core's NATS, which the peer core's ingest reaches it
// through. The edges reach the cores directly: those links are listed, not
// impairable.
//
// With -wan every link of the topology is impairable: it is the pair of
// sites' network namespaces, and a profile is applied to the traffic
// between them in each direction by the router of cli/internal/wan — every
// connection between the two sites, not only the ones a proxy fronts.

// linkPlan is an impairable link and the proxies that carry it.
type linkPlan struct {
	link    netprofile.Link
	proxies []proxyPlan
}

// proxyPlan is one proxy of a link.
type proxyPlan struct {
	// role is what it fronts: udp or ws (an uplink's ingest listeners),
	// nats (a core's NATS, for the peer core).
	role string
	// site is the site whose listener it fronts.
	site           string
	udp            bool
	listen, target string
	// forwardUp: the proxy's clients are at the link's From end, so its
	// upstream is the link's forward direction.
	forwardUp bool
	// tls: what it carries is TLS (wss://), passed through untouched.
	tls bool
}

// mustLink returns a link of netprofile's topology; the plan names only
// those.
func mustLink(name string) netprofile.Link {
	l, ok := netprofile.LinkByName(name)
	if !ok {
		panic("devstack: netprofile has no link " + name)
	}
	return l
}

// addr is the address clients reach the proxy of role at, as a station
// or NATS client is given it.
func (lp linkPlan) addr(role string) string {
	for _, p := range lp.proxies {
		if p.role == role {
			return p.url(p.listen)
		}
	}
	return ""
}

// url is how a client reaches hostPort, the proxy's or its target's.
func (p proxyPlan) url(hostPort string) string {
	switch p.role {
	case "ws":
		if p.tls {
			return "wss://" + hostPort + "/v1/station/ws"
		}
		return "ws://" + hostPort + "/v1/station/ws"
	case "nats":
		return "nats://" + hostPort
	}
	return hostPort
}

// LinkState is a link as endpoints.json (under "links", by name) and the
// control API (GET /v1/links) show it.
type LinkState struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// From and To are the link's ends; forward is From → To.
	From string `json:"from"`
	To   string `json:"to"`
	// Profile is the netprofile profile the link is under, Since when it
	// was applied.
	Profile string    `json:"profile"`
	Since   time.Time `json:"since"`
	// Phase is the profile's current phase (typhoon's rain, gust,
	// outage); only the control API shows it, as it changes on its own.
	Phase string `json:"phase,omitempty"`
	// An uplink's proxies, where stations send (UDP host:port, WebSocket
	// URL), and the ingest listeners behind them.
	UDP       string `json:"udp,omitempty"`
	WS        string `json:"ws,omitempty"`
	TargetUDP string `json:"target_udp,omitempty"`
	TargetWS  string `json:"target_ws,omitempty"`
	// NATS is, for the link between the cores, each core's NATS as its
	// peer reaches it through the link, by site.
	NATS map[string]string `json:"nats,omitempty"`
	// With -wan: Netns and Address are each end's network namespace and
	// address, by site.
	Netns   map[string]string `json:"netns,omitempty"`
	Address map[string]string `json:"address,omitempty"`
	// Stats count the traffic through the link (control API only).
	Stats *LinkStats `json:"stats,omitempty"`
}

// LinkStats count a link's traffic in each direction since shindo dev
// started.
type LinkStats struct {
	Forward DirectionStats `json:"forward"`
	Back    DirectionStats `json:"back"`
	// Connections are the streams (WebSocket uplinks, NATS connections)
	// open through the link now.
	Connections int `json:"connections"`
}

// DirectionStats count one direction of a link.
type DirectionStats struct {
	// Datagrams received, and of them Dropped (loss, blackhole, overflow)
	// and Overflow (the proxy's queue was full: not the profile's doing).
	// With -wan they count IP packets, TCP segments as well.
	Datagrams uint64 `json:"datagrams"`
	Dropped   uint64 `json:"dropped"`
	Overflow  uint64 `json:"overflow"`
	// Bytes of streams forwarded; Held counts chunks a blackhole held.
	Bytes uint64 `json:"bytes"`
	Held  uint64 `json:"held"`
}

func (d *DirectionStats) addUDP(c faultproxy.Counters) {
	d.Datagrams += c.Received
	d.Dropped += c.Dropped()
	d.Overflow += c.DroppedOverflow
}

func (d *DirectionStats) addTCP(c faultproxy.StreamCounters) {
	d.Bytes += c.Bytes
	d.Held += c.Held
}

// netLink is a link of the running stack.
type netLink struct {
	plan    linkPlan
	proxies []*liveProxy
	log     *slog.Logger
	// net carries the link with -wan (no proxies then); addrs are where
	// its traffic goes, as LinkState shows them.
	net   *wan.Net
	addrs LinkState

	// setMu serialises profile changes.
	setMu sync.Mutex
	// stop ends the current profile's phases.
	stop func()

	mu      sync.Mutex
	profile string
	phase   string
	since   time.Time
}

// liveProxy is a running proxy of a link: udp or tcp.
type liveProxy struct {
	plan proxyPlan
	udp  *faultproxy.UDP
	tcp  *faultproxy.TCP
}

// udpQueue is how many datagrams an uplink's UDP proxy lets wait per
// direction: the fleet sends every station's two packets of a tick at
// once, and with a profile's delay all of them wait together.
func udpQueue(stations int) int { return max(4096, 8*stations) }

// openLinks starts the proxies of every link, under profile; they pass
// everything under clear.
func (s *stack) openLinks(profile string) error {
	prof, err := netprofile.Lookup(profile)
	if err != nil {
		return err
	}
	if s.wan != nil {
		for _, lk := range netprofile.Links() {
			l := &netLink{plan: linkPlan{link: lk}, log: s.log, net: s.wan, addrs: s.wanAddrs(lk)}
			s.links = append(s.links, l)
			l.set(prof)
		}
		return nil
	}
	for _, lp := range s.plan.links {
		l := &netLink{plan: lp, log: s.log}
		s.links = append(s.links, l)
		for _, pp := range lp.proxies {
			lv := &liveProxy{plan: pp}
			if pp.udp {
				// KeepOrder: a path reorders rarely, and jitter alone
				// would swap the back-to-back packets of a tick.
				lv.udp, err = faultproxy.ListenUDP(pp.listen, pp.target, faultproxy.Options{KeepOrder: true, MaxQueue: udpQueue(s.cfg.Stations)})
			} else {
				lv.tcp, err = faultproxy.ListenTCP(pp.listen, pp.target, faultproxy.Options{})
			}
			if err != nil {
				return fmt.Errorf("link %s: %s proxy on %s: %w", lp.link.Name, pp.role, pp.listen, err)
			}
			l.proxies = append(l.proxies, lv)
		}
		l.set(prof)
	}
	return nil
}

// closeLinks ends the links' phases and closes their proxies.
func (s *stack) closeLinks() {
	for _, l := range s.links {
		l.setMu.Lock()
		if l.stop != nil {
			l.stop()
			l.stop = nil
		}
		l.setMu.Unlock()
		for _, p := range l.proxies {
			if p.udp != nil {
				_ = p.udp.Close()
			} else {
				_ = p.tcp.Close()
			}
		}
	}
}

// set puts the link under prof, ending the phases of the one before.
func (l *netLink) set(prof netprofile.Profile) {
	l.setMu.Lock()
	defer l.setMu.Unlock()
	if l.stop != nil {
		l.stop()
	}
	l.mu.Lock()
	l.profile, l.since = prof.Name, time.Now()
	l.mu.Unlock()
	phases := prof.Phases(l.plan.link)
	l.stop = netprofile.Start(phases, func(ph netprofile.Phase) {
		l.apply(ph)
		if len(phases) > 1 {
			l.log.Info("link phase", slog.String("link", l.plan.link.Name), slog.String("profile", prof.Name),
				slog.String("phase", ph.Name), slog.String("forward", ph.Forward.String()), slog.String("back", ph.Back.String()))
		}
	})
}

// apply gives every proxy of the link the phase's shapes, each direction
// the right way round.
func (l *netLink) apply(ph netprofile.Phase) {
	if l.net != nil {
		lk := l.plan.link
		for _, err := range []error{l.net.Set(lk.From, lk.To, ph.Forward), l.net.Set(lk.To, lk.From, ph.Back)} {
			if err != nil {
				l.log.Error("link not set", slog.String("link", lk.Name), slog.Any("error", err))
			}
		}
		l.mu.Lock()
		l.phase = ph.Name
		l.mu.Unlock()
		return
	}
	for _, p := range l.proxies {
		upS, downS := ph.Forward, ph.Back
		if !p.plan.forwardUp {
			upS, downS = ph.Back, ph.Forward
		}
		up, down := upS.Impairment(), downS.Impairment()
		if p.udp != nil {
			// A path without UDP is a dead one to the datagram proxies.
			up.Blackhole = up.Blackhole || upS.NoUDP
			down.Blackhole = down.Blackhole || downS.NoUDP
			p.udp.Set(faultproxy.Upstream, up)
			p.udp.Set(faultproxy.Downstream, down)
		} else {
			p.tcp.Set(faultproxy.Upstream, up)
			p.tcp.Set(faultproxy.Downstream, down)
		}
	}
	l.mu.Lock()
	l.phase = ph.Name
	l.mu.Unlock()
}

// state describes the link; withLive adds its phase and counters.
func (l *netLink) state(withLive bool) LinkState {
	lk := l.plan.link
	st := LinkState{Name: lk.Name, Kind: string(lk.Kind), From: lk.From, To: lk.To}
	l.mu.Lock()
	st.Profile, st.Since = l.profile, l.since
	if withLive {
		st.Phase = l.phase
	}
	l.mu.Unlock()
	if l.net != nil {
		st.UDP, st.WS, st.TargetUDP, st.TargetWS = l.addrs.UDP, l.addrs.WS, l.addrs.TargetUDP, l.addrs.TargetWS
		st.NATS, st.Netns, st.Address = l.addrs.NATS, l.addrs.Netns, l.addrs.Address
		if withLive {
			fwd, back := l.net.Stats(lk.From, lk.To), l.net.Stats(lk.To, lk.From)
			st.Stats = &LinkStats{Forward: wanDirection(fwd), Back: wanDirection(back)}
		}
		return st
	}
	for _, p := range l.plan.proxies {
		switch p.role {
		case "udp":
			st.UDP, st.TargetUDP = p.url(p.listen), p.url(p.target)
		case "ws":
			st.WS, st.TargetWS = p.url(p.listen), p.url(p.target)
		case "nats":
			if st.NATS == nil {
				st.NATS = map[string]string{}
			}
			st.NATS[p.site] = p.url(p.listen)
		}
	}
	if !withLive {
		return st
	}
	st.Stats = &LinkStats{}
	for _, p := range l.proxies {
		fwd, back := &st.Stats.Forward, &st.Stats.Back
		if !p.plan.forwardUp {
			fwd, back = back, fwd
		}
		if p.udp != nil {
			u := p.udp.Stats()
			fwd.addUDP(u.Upstream)
			back.addUDP(u.Downstream)
			continue
		}
		t := p.tcp.Stats()
		fwd.addTCP(t.Upstream)
		back.addTCP(t.Downstream)
		st.Stats.Connections += t.Open
	}
	return st
}

func wanDirection(d wan.DirStats) DirectionStats {
	return DirectionStats{Datagrams: d.Packets, Dropped: d.Dropped, Overflow: d.Overflow, Bytes: d.Bytes}
}

// wanAddrs are the ends of lk with -wan: the sites' namespaces and
// addresses, and for an uplink the core's ingest listeners, which the
// stations send to straight, for the link between the cores their NATS.
func (s *stack) wanAddrs(lk netprofile.Link) LinkState {
	st := LinkState{Netns: map[string]string{}, Address: map[string]string{}}
	for _, end := range []string{lk.From, lk.To} {
		if site, ok := s.wan.Site(end); ok {
			st.Netns[end], st.Address[end] = site.Netns, site.Addr.String()
		}
	}
	for _, p := range s.plan.processes() {
		switch {
		case lk.Kind == netprofile.Uplink && p.role == "ingest" && p.site == lk.To:
			st.UDP, st.WS = p.listeners["udp"], p.listeners["ws"]
			st.TargetUDP, st.TargetWS = st.UDP, st.WS
		case lk.Kind == netprofile.Intersite && p.role == "nats":
			if st.NATS == nil {
				st.NATS = map[string]string{}
			}
			st.NATS[p.site] = p.listeners["url"]
		}
	}
	return st
}

// link returns the running link called name.
func (s *stack) link(name string) *netLink {
	for _, l := range s.links {
		if l.plan.link.Name == name {
			return l
		}
	}
	return nil
}

// linkNames lists the impairable links.
func (s *stack) linkNames() []string {
	var out []string
	for _, l := range s.links {
		out = append(out, l.plan.link.Name)
	}
	return out
}

// linksDoc is the "links" section of endpoints.json: every impairable link
// by name, without what changes on its own.
func (s *stack) linksDoc() map[string]LinkState {
	out := map[string]LinkState{}
	for _, l := range s.links {
		out[l.plan.link.Name] = l.state(false)
	}
	return out
}

// isPartitioned tells whether the link between the cores is cut.
func (s *stack) isPartitioned() bool {
	l := s.link("intersite")
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.profile == netprofile.Cut
}

// Link actions of the control API.
const (
	actDegrade = "degrade" // under profile=NAME
	actCut     = "cut"     // the profile cut
	actHeal    = "heal"    // the profile clear
)

// Link names the control API cannot act on.
var (
	errUnknownLink   = errors.New("unknown link")
	errNotImpairable = errors.New("not impairable on loopback yet")
)

// setLink puts the link called name under profile, logs it and rewrites
// endpoints.json.
func (s *stack) setLink(name, profile string) (LinkState, error) {
	l := s.link(name)
	if l == nil {
		valid := strings.Join(s.linkNames(), ", ")
		if lk, ok := netprofile.LinkByName(name); ok {
			return LinkState{}, fmt.Errorf("link %s (%s ↔ %s) is %w: the edges reach the cores directly; links are %s",
				name, lk.From, lk.To, errNotImpairable, valid)
		}
		return LinkState{}, fmt.Errorf("%w %q: links are %s", errUnknownLink, name, valid)
	}
	prof, err := netprofile.Lookup(profile)
	if err != nil {
		return LinkState{}, err
	}
	l.set(prof)
	s.log.Warn("link changed by the control API", slog.String("link", name), slog.String("profile", prof.Name))
	if err := s.endpoints(); err != nil {
		s.log.Error("endpoints.json not rewritten", slog.Any("error", err))
	}
	return l.state(true), nil
}

// ProfileInfo is a profile as GET /v1/links lists it.
type ProfileInfo struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

// UnimpairableLink is a link of the topology shindo dev cannot impair.
type UnimpairableLink struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	From string `json:"from"`
	To   string `json:"to"`
	Why  string `json:"why"`
}

func (s *stack) linkRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/links", func(w http.ResponseWriter, r *http.Request) {
		doc := struct {
			Links        []LinkState        `json:"links"`
			Unimpairable []UnimpairableLink `json:"unimpairable"`
			Profiles     []ProfileInfo      `json:"profiles"`
		}{Links: []LinkState{}}
		for _, l := range s.links {
			doc.Links = append(doc.Links, l.state(true))
		}
		for _, lk := range netprofile.Links() {
			if s.link(lk.Name) == nil {
				doc.Unimpairable = append(doc.Unimpairable, UnimpairableLink{Name: lk.Name, Kind: string(lk.Kind), From: lk.From, To: lk.To,
					Why: errNotImpairable.Error() + ": the edges reach the cores directly"})
			}
		}
		for _, p := range netprofile.Profiles() {
			doc.Profiles = append(doc.Profiles, ProfileInfo{Name: p.Name, Summary: p.Summary})
		}
		writeControl(w, http.StatusOK, doc)
	})
	mux.HandleFunc("POST /v1/links/{link}/{action}", func(w http.ResponseWriter, r *http.Request) {
		var profile string
		switch action := r.PathValue("action"); action {
		case actDegrade:
			var err error
			if profile, err = profileParam(r); err != nil {
				writeControl(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
			if profile == "" {
				writeControl(w, http.StatusBadRequest, map[string]string{"error": "degrade needs a profile (profile=NAME): profiles are " +
					strings.Join(netprofile.ProfileNames(), ", ")})
				return
			}
		case actCut:
			profile = netprofile.Cut
		case actHeal:
			profile = netprofile.Clear
		default:
			writeControl(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("unknown action %q: want degrade, cut or heal", action)})
			return
		}
		st, err := s.setLink(r.PathValue("link"), profile)
		switch {
		case errors.Is(err, errUnknownLink), errors.Is(err, errNotImpairable):
			writeControl(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			writeControl(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		default:
			writeControl(w, http.StatusOK, st)
		}
	})
}

// maxControlBody bounds what a control request may send.
const maxControlBody = 4 << 10

// profileParam reads profile=NAME from the query, a form body, or a JSON
// body {"profile": NAME}.
func profileParam(r *http.Request) (string, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, maxControlBody)
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		var body struct {
			Profile string `json:"profile"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			return "", fmt.Errorf("body: want {\"profile\": NAME}: %w", err)
		}
		if body.Profile != "" {
			return body.Profile, nil
		}
		return r.URL.Query().Get("profile"), nil
	}
	if err := r.ParseForm(); err != nil {
		return "", fmt.Errorf("body: %w", err)
	}
	return r.Form.Get("profile"), nil
}
