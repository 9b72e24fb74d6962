package devstack

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"shindo.dev/cli/internal/proc"
	"shindo.dev/lib/peerid"
)

// The port plan: each site owns a block of 100 ports from the base, and
// each service a fixed offset inside its block.
const (
	portSpan   = 1000
	fleetOff   = 900
	controlOff = 950

	ingestUDP, ingestWS, ingestGRPC, ingestAdmin  = 0, 1, 2, 3
	rtsGRPC, rtsAdmin                             = 10, 11
	waveformGRPC, waveformAdmin, waveformSeedLink = 20, 21, 22
	dataHTTP, dataGRPC, dataAdmin                 = 30, 31, 32
	postgresPort, patroniREST                     = 40, 41
	haproxyPort, haproxyHealth                    = 43, 44
	natsClient, natsHTTP, natsPeerProxy           = 50, 51, 52
	etcdClient, etcdPeer, etcdMetrics             = 60, 61, 62
	uplinkProxyUDP, uplinkProxyWS                 = 70, 71
	edgeHTTP, edgeGRPC, edgeAdmin, edgePlain      = 0, 1, 2, 3
	edgeSeedLink, edgeSeedLinkTLS                 = 4, 5
)

// site is one place of the topology and its block in the port plan.
type site struct {
	name  string
	block int
	core  bool
}

// The sites of the topology: two cores, two edges.
var (
	tnn   = site{"TNN-1", 0, true}
	tyo   = site{"TYO-1", 100, true}
	tpe   = site{"TPE-1", 200, false}
	khh   = site{"KHH-1", 300, false}
	cores = []site{tnn, tyo}
	edges = []site{tpe, khh}
)

// edgeSource is the address the edges' requests to a data API come from,
// the only proxy it trusts to name the client: every process binds host,
// and connects from it, or from loopback when host is a wildcard or a name.
// With -wan each edge connects from its own site's address.
func edgeSource(host string, wanHosts ...string) string {
	if len(wanHosts) > 0 {
		return strings.Join(wanHosts, ",")
	}
	if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
		return a.String()
	}
	return "127.0.0.1,::1"
}

// stationsSite is where the simulated fleet is with -wan: a site of its
// own, at the far end of the uplinks.
const stationsSite = "stations"

// wanSites are the sites of -wan by index, the third octet of their
// addresses (cli/internal/wan).
var wanSites = map[string]byte{tnn.name: 1, tyo.name: 2, tpe.name: 3, khh.name: 4, stationsSite: 5}

// defaultConnsPerIP is the services' -max-conns-per-ip.
const defaultConnsPerIP = 4096

// binaries are the executables the topology needs, besides shindo itself.
var binaries = []string{"shindo-ingest", "shindo-rts", "shindo-waveform", "shindo-dataapi", "shindo-edge"}

type process struct {
	name     string // e.g. "TNN-1-rts"; also the log file name
	site     string
	role     string // ingest, rts, …, fleet
	bin      string
	args     []string
	env      []string // extra environment, for secrets kept off the command line
	readyURL string
	// readyTLS is how readiness asks over https:// (the operator's
	// certificate); nil for plain.
	readyTLS *tls.Config
	proc     *proc.Proc
	// down: taken down through the control API, so its exit is expected.
	down bool
	// restarts is the supervisor's policy and count of short runs.
	restarts *proc.Restarts
	// as is the user to run it as (PostgreSQL and Patroni refuse root).
	as *syscall.Credential
	// listeners by kind (udp, ws, grpc, admin, http) as endpoints.json
	// shows them.
	listeners map[string]string
}

type port struct {
	n    int
	udp  bool
	what string
}

type plan struct {
	cfg           Config
	stationsFile  string
	endpointsFile string
	tokenFile     string
	// notifyTokenFile holds the token app servers post notifications with.
	notifyTokenFile string
	// dataDir holds the services' own data (ingest journals, waveform
	// archives); made afresh at every start, like the database.
	dataDir string
	// databaseURL is where every service finds the metadata database.
	databaseURL string
	// processes in start order, grouped: each group waits for the one
	// before it to be ready.
	groups [][]*process
	// provisioner is the data API the stations are provisioned through,
	// before group provisionBefore starts (the groups before it are up).
	provisioner     *process
	provisionBefore int
	// databaseBefore, with -ha, is the group before which the replicated
	// metadata database is reachable through HAProxy and the dev database
	// is made (-1 without -ha).
	databaseBefore int
	// ha are the files of the replicated metadata database (-ha).
	ha    *haFiles
	ports []port
	// certs are the certificates to issue from caFile's CA before the
	// first process starts (-tls).
	certs  []certPlan
	caFile string
	// operatorCert and operatorKey are the tools' client certificate for
	// the services' gRPC (-tls).
	operatorCert, operatorKey string
	// links are the network paths that run through in-process proxies,
	// which the control API can degrade and cut (links.go): the stations'
	// uplinks to each core and the link between the cores.
	links []linkPlan
	// control is the control API's listen address.
	control string
	// hosts are, with -wan, each site's address (stations for the fleet);
	// without, nil: every process binds cfg.Host.
	hosts map[string]string
}

// host is the address the processes of site name bind.
func (p *plan) host(name string) string {
	if h, ok := p.hosts[name]; ok {
		return h
	}
	return p.cfg.Host
}

// wanSite is the site whose network namespace pr runs in with -wan.
func (pr *process) wanSite() string {
	if pr.role == "fleet" {
		return stationsSite
	}
	return pr.site
}

func newPlan(cfg Config) *plan { return newPlanOn(cfg, nil) }

// newPlanOn is the plan with each site's processes at its address in
// hosts (by site name; stations for the fleet), as -wan places them; the
// control API and the dev metadata database stay on cfg.Host in the root
// namespace (the database also reached at TNN-1's address, wan.go).
func newPlanOn(cfg Config, hosts map[string]string) *plan {
	p := &plan{
		hosts:           hosts,
		cfg:             cfg,
		stationsFile:    filepath.Join(cfg.Dir, "stations.json"),
		endpointsFile:   filepath.Join(cfg.Dir, "endpoints.json"),
		tokenFile:       filepath.Join(cfg.Dir, "admin-token"),
		notifyTokenFile: filepath.Join(cfg.Dir, "notify-token"),
		caFile:          filepath.Join(cfg.Dir, "tls", "ca.pem"),
		dataDir:         filepath.Join(cfg.Dir, "data"),
		databaseURL:     fmt.Sprintf("postgres://postgres@%s/%s?%s", hostPort(hostIn(hosts, tnn.name, cfg.Host), cfg.PortBase+tnn.block+postgresPort), dbName, dbTLSQuery(cfg, "", "")),
		databaseBefore:  -1,
		provisionBefore: 1,
	}
	p.addPort(tnn.name+" PostgreSQL", cfg.PortBase+tnn.block+postgresPort, false)
	// dbURL is where a core's services find the metadata database: the
	// member, or with -ha the core's HAProxy, which leads to the primary.
	dbURL := func(c site) string {
		if !cfg.HA {
			return p.databaseURL
		}
		return fmt.Sprintf("postgres://postgres@%s/%s?%s", hostPort(hostIn(hosts, c.name, cfg.Host), cfg.PortBase+c.block+haproxyPort), dbName, dbTLSQuery(cfg, "", ""))
	}
	p.control = hostPort(cfg.Host, cfg.PortBase+controlOff)
	p.addPort("control API", cfg.PortBase+controlOff, false)
	addr := func(s site, off int) string { return hostPort(p.host(s.name), cfg.PortBase+s.block+off) }
	wan := hosts != nil
	bin := func(name string) string { return filepath.Join(cfg.BinDir, name) }
	common := func(s site, grpcOff, adminOff int) []string {
		args := []string{"-site", s.name, "-grpc-addr", addr(s, grpcOff), "-admin-addr", addr(s, adminOff),
			"-log-level", cfg.LogLevel, "-shutdown-timeout", "8s"}
		if cfg.OTel != "" {
			args = append(args, "-otlp-endpoint", cfg.OTel)
		}
		return args
	}
	svc := func(s site, role string, grpcOff, adminOff int, extra map[string]int, args ...string) *process {
		args = append(common(s, grpcOff, adminOff), args...)
		if cfg.TLS {
			// gRPC between the services over mutual TLS, each with the
			// certificate of its site and role.
			cert, key := p.issue(s, role)
			args = append(args, "-mtls-cert", cert, "-mtls-key", key, "-mtls-ca", p.caFile)
		}
		pr := &process{
			name: s.name + "-" + role, site: s.name, role: role, bin: bin("shindo-" + role),
			args: args,
			// The database's client certificate (-tls): its URL names
			// the CA, and the PostgreSQL client takes the certificate
			// from here.
			env:       p.dbClientEnv(s, role),
			readyURL:  "http://" + addr(s, adminOff) + "/readyz",
			listeners: map[string]string{"grpc": addr(s, grpcOff), "admin": "http://" + addr(s, adminOff)},
		}
		p.addPort(s.name+" "+role+" gRPC", cfg.PortBase+s.block+grpcOff, false)
		p.addPort(s.name+" "+role+" admin", cfg.PortBase+s.block+adminOff, false)
		for kind, off := range extra {
			p.addPort(s.name+" "+role+" "+kind, cfg.PortBase+s.block+off, kind == "udp")
		}
		return pr
	}

	var natsServers, backends, ingests []*process
	// The quorum store: a member at each core and at TPE-1.
	var etcds []*process
	var etcdURLs []string
	var members []string
	etcdScheme := "http"
	if cfg.TLS {
		etcdScheme = "https"
	}
	for _, s := range []site{tnn, tyo, tpe} {
		members = append(members, s.name+"="+etcdScheme+"://"+addr(s, etcdPeer))
	}
	for _, s := range []site{tnn, tyo, tpe} {
		client, peer, metrics := etcdScheme+"://"+addr(s, etcdClient), etcdScheme+"://"+addr(s, etcdPeer), "http://"+addr(s, etcdMetrics)
		etcdURLs = append(etcdURLs, client)
		e := &process{name: s.name + "-etcd", site: s.name, role: "etcd", bin: bin("shindo"),
			args: []string{"etcd", "-name", s.name, "-data-dir", filepath.Join(p.dataDir, s.name+"-etcd"),
				"-client-url", client, "-peer-url", peer, "-metrics-url", metrics,
				"-initial-cluster", strings.Join(members, ","), "-cluster-token", "shindo-dev", "-log-level", cfg.LogLevel},
			readyURL:  metrics + "/health",
			listeners: map[string]string{"client": client, "peer": peer, "metrics": metrics},
		}
		if cfg.TLS {
			// Clients and the other members over mutual TLS only.
			cert, key := p.issue(s, "etcd")
			e.args = append(e.args, "-tls-cert", cert, "-tls-key", key, "-tls-ca", p.caFile)
		}
		p.addPort(s.name+" etcd client", cfg.PortBase+s.block+etcdClient, false)
		p.addPort(s.name+" etcd peer", cfg.PortBase+s.block+etcdPeer, false)
		p.addPort(s.name+" etcd metrics and health", cfg.PortBase+s.block+etcdMetrics, false)
		etcds = append(etcds, e)
	}
	var dataAPIs []*process
	var edgeHosts []string
	if wan {
		for _, e := range edges {
			edgeHosts = append(edgeHosts, p.host(e.name))
		}
	}
	natsURL := func(c site) string { return "nats://" + addr(c, natsClient) }
	var rtsAddrs, waveformAddrs, seedLinks, dataURLs, dataGRPCs, natsURLs, udps, wss []string
	intersite := linkPlan{link: mustLink("intersite")}
	fleetConns := 2*cfg.Stations + 16
	for i, c := range cores {
		peer := cores[1-i]
		ns := &process{name: c.name + "-nats", site: c.name, role: "nats", bin: bin("shindo"),
			args: []string{"nats", "-site", c.name, "-client-addr", addr(c, natsClient), "-http-addr", addr(c, natsHTTP),
				"-store-dir", filepath.Join(p.dataDir, c.name+"-nats"), "-log-level", cfg.LogLevel},
			readyURL:  "http://" + addr(c, natsHTTP) + "/healthz",
			listeners: map[string]string{"url": natsURL(c), "monitor": "http://" + addr(c, natsHTTP)},
		}
		if cfg.TLS {
			// Clients over mutual TLS only, each allowed what its role may.
			cert, key := p.issue(c, "nats")
			ns.args = append(ns.args, "-tls-cert", cert, "-tls-key", key, "-tls-ca", p.caFile)
		}
		p.addPort(c.name+" NATS", cfg.PortBase+c.block+natsClient, false)
		p.addPort(c.name+" NATS monitoring", cfg.PortBase+c.block+natsHTTP, false)
		// The peer core reaches this core's NATS through the link between
		// the cores: on loopback a proxy, with -wan the network itself.
		peerNATS := "nats://" + addr(peer, natsPeerProxy)
		if wan {
			peerNATS = natsURL(peer)
		} else {
			p.addPort(c.name+" NATS for the peer core", cfg.PortBase+c.block+natsPeerProxy, false)
			// The peer core is the proxy's client: its traffic upstream is
			// forward (TNN-1 → TYO-1) at TYO-1's proxy and back at TNN-1's.
			intersite.proxies = append(intersite.proxies, proxyPlan{role: "nats", site: c.name,
				listen: addr(c, natsPeerProxy), target: addr(c, natsClient), forwardUp: c.name == intersite.link.To})
		}
		natsServers = append(natsServers, ns)
		rts := svc(c, "rts", rtsGRPC, rtsAdmin, nil, "-database-url", dbURL(c), "-nats", natsURL(c),
			"-peer-nats", peerNATS, "-peer-site", peer.name,
			"-archive-dir", filepath.Join(p.dataDir, c.name+"-rts"))
		wf := svc(c, "waveform", waveformGRPC, waveformAdmin, map[string]int{"SeedLink": waveformSeedLink},
			"-data-dir", filepath.Join(p.dataDir, c.name+"-waveform"), "-seedlink-addr", addr(c, waveformSeedLink),
			"-trusted-proxies", edgeSource(cfg.Host, edgeHosts...))
		// SeedLink clients connect over TCP (slinktool, ObsPy) or WebSocket
		// (seisplotjs) on the same port, through the edges; under -tls the
		// cores' port is an internal hop (mutual TLS, edges and operators).
		wf.listeners["seedlink"] = addr(c, waveformSeedLink)
		data := svc(c, "dataapi", dataGRPC, dataAdmin, map[string]int{"HTTP": dataHTTP},
			"-http-addr", addr(c, dataHTTP), "-database-url", dbURL(c), "-ingest", addr(c, ingestGRPC), "-peer-ingest", addr(peer, ingestGRPC),
			"-waveform", addr(c, waveformGRPC), "-nats", natsURL(c),
			// The core's archive is on the same disk: fdsnws-dataselect
			// sends its stored records from the day files.
			"-waveform-dir", filepath.Join(p.dataDir, c.name+"-waveform"),
			"-rts", addr(c, rtsGRPC)+","+addr(peer, rtsGRPC), "-trusted-proxies", edgeSource(cfg.Host, edgeHosts...))
		// Under -tls the REST API is an internal hop like the gRPC: mutual
		// TLS, served to the edges and the operator's tools.
		data.listeners["http"] = p.webScheme() + "://" + addr(c, dataHTTP)
		// Secrets by file, never on a command line other users can read.
		data.env = append(data.env, "SHINDO_DATAAPI_ADMIN_TOKENS_FILE="+p.tokenFile)
		if cfg.HA {
			// Reads at the core's own member, a standby or the primary.
			data.args = append(data.args, "-read-database-url",
				fmt.Sprintf("postgres://postgres@%s/%s?%s", addr(c, postgresPort), dbName, dbTLSQuery(cfg, "", "")))
		}
		ws := proxyPlan{role: "ws", tls: cfg.TLS}.url(addr(c, ingestWS))
		ing := svc(c, "ingest", ingestGRPC, ingestAdmin, map[string]int{"udp": ingestUDP, "WebSocket": ingestWS},
			"-udp-addr", addr(c, ingestUDP), "-ws-addr", addr(c, ingestWS), "-database-url", dbURL(c),
			"-data-dir", filepath.Join(p.dataDir, c.name+"-ingest"),
			"-nats", natsURL(c), "-peer-nats", peerNATS, "-peer-site", peer.name,
			"-rts", addr(c, rtsGRPC), "-waveform", addr(c, waveformGRPC),
			"-trace-every", strconv.FormatUint(cfg.TraceEvery, 10),
			// The simulated fleet's stations, and any tool that sends
			// through their uplink (links in endpoints.json), all come from
			// the uplink proxy's address: two each while one replaces
			// another, and 16 for the tools.
			"-ws-max-per-ip", strconv.Itoa(fleetConns))
		if fleetConns > defaultConnsPerIP {
			ing.args = append(ing.args, "-max-conns-per-ip", strconv.Itoa(fleetConns+64))
		}
		if cfg.TLS {
			cert, key := p.issue(c, "ingest")
			ing.args = append(ing.args, "-ws-tls-cert", cert, "-ws-tls-key", key)
		}
		ing.listeners["udp"], ing.listeners["ws"] = addr(c, ingestUDP), ws
		backends = append(backends, rts, wf, data)
		dataAPIs = append(dataAPIs, data)
		ingests = append(ingests, ing)
		rtsAddrs = append(rtsAddrs, addr(c, rtsGRPC))
		natsURLs = append(natsURLs, natsURL(c))
		waveformAddrs = append(waveformAddrs, addr(c, waveformGRPC))
		seedLinks = append(seedLinks, addr(c, waveformSeedLink))
		dataURLs = append(dataURLs, data.listeners["http"])
		dataGRPCs = append(dataGRPCs, addr(c, dataGRPC))
		if wan {
			// The stations reach the core's ingest itself, across the
			// network between their namespace and the core's.
			udps, wss = append(udps, addr(c, ingestUDP)), append(wss, ws)
			continue
		}
		// The stations reach the core's ingest through the proxies of
		// their uplink to it.
		up := linkPlan{link: mustLink("uplink-" + c.name), proxies: []proxyPlan{
			{role: "udp", site: c.name, udp: true, listen: addr(c, uplinkProxyUDP), target: addr(c, ingestUDP), forwardUp: true},
			{role: "ws", site: c.name, listen: addr(c, uplinkProxyWS), target: addr(c, ingestWS), forwardUp: true, tls: cfg.TLS},
		}}
		p.addPort(c.name+" uplink proxy (UDP)", cfg.PortBase+c.block+uplinkProxyUDP, true)
		p.addPort(c.name+" uplink proxy (WebSocket)", cfg.PortBase+c.block+uplinkProxyWS, false)
		p.links = append(p.links, up)
		udps, wss = append(udps, up.addr("udp")), append(wss, up.addr("ws"))
	}
	if !wan {
		p.links = append(p.links, intersite)
	}
	// Both edges prefer TNN-1, the nearer core; TYO-1 takes over, or
	// takes the offloaded share of the data API.
	var edgeProcs []*process
	var entrances []string
	for _, e := range edges {
		entrances = append(entrances, p.webScheme()+"://"+addr(e, edgeHTTP))
	}
	for _, e := range edges {
		edge := svc(e, "edge", edgeGRPC, edgeAdmin, map[string]int{"HTTP": edgeHTTP, "SeedLink": edgeSeedLink},
			"-http-addr", addr(e, edgeHTTP), "-rts", strings.Join(rtsAddrs, ","), "-data-api", strings.Join(dataURLs, ","),
			"-seedlink-addr", addr(e, edgeSeedLink), "-seedlink", strings.Join(seedLinks, ","),
			"-data-grpc", strings.Join(dataGRPCs, ","),
			"-waveform", strings.Join(waveformAddrs, ","), "-entrances", strings.Join(entrances, ","),
			"-nats", strings.Join(natsURLs, ","), "-etcd", strings.Join(etcdURLs, ","))
		edge.listeners["http"] = p.webScheme() + "://" + addr(e, edgeHTTP)
		edge.listeners["seedlink"] = addr(e, edgeSeedLink)
		if cfg.TLS {
			// HTTPS on the edge's HTTP port; plain HTTP beside it only
			// redirects there.
			cert, key := p.issue(e, "edge")
			edge.args = append(edge.args, "-tls-cert", cert, "-tls-key", key, "-http-plain-addr", addr(e, edgePlain),
				"-seedlink-tls-addr", addr(e, edgeSeedLinkTLS))
			edge.listeners["http_plain"] = "http://" + addr(e, edgePlain)
			edge.listeners["seedlink_tls"] = addr(e, edgeSeedLinkTLS)
			p.addPort(e.name+" edge plain HTTP (redirect)", cfg.PortBase+e.block+edgePlain, false)
			p.addPort(e.name+" edge SeedLink over TLS", cfg.PortBase+e.block+edgeSeedLinkTLS, false)
		}
		edge.env = append(edge.env, "SHINDO_EDGE_NOTIFY_TOKENS_FILE="+p.notifyTokenFile)
		edgeProcs = append(edgeProcs, edge)
	}
	edge := edgeProcs[0]
	if cfg.HA {
		patronis, haproxies := p.haProcesses(addr)
		p.groups = [][]*process{etcds, patronis, haproxies, slices.Concat(natsServers, backends), ingests, edgeProcs}
		p.databaseBefore, p.provisionBefore = 3, 4
	} else {
		p.groups = [][]*process{slices.Concat(etcds, natsServers, backends), ingests, edgeProcs}
	}
	p.provisioner = dataAPIs[0]
	if cfg.TLS {
		p.operatorCert, p.operatorKey = p.issueFor(operatorSite, peerid.Operator)
	}

	if cfg.Simulate {
		status := hostPort(p.host(stationsSite), cfg.PortBase+fleetOff)
		p.addPort("fleet status", cfg.PortBase+fleetOff, false)
		fleet := &process{name: "fleet", role: "fleet", bin: bin("shindo"),
			args: []string{"sim", "-stations-file", p.stationsFile,
				"-primary", udps[0], "-primary-ws", wss[0], "-backup", udps[1], "-backup-ws", wss[1],
				"-time-url", edge.listeners["http"] + "/ntp",
				"-status-addr", status, "-log-format", "json", "-log-level", cfg.LogLevel},
			readyURL:  "http://" + status + "/status",
			listeners: map[string]string{"status": "http://" + status + "/status"},
		}
		if cfg.TLS {
			fleet.args = append(fleet.args, "-ca-file", p.caFile)
		}
		if cfg.Scenario != "" {
			fleet.args = append(fleet.args, "-scenario", cfg.Scenario, "-scenario-in", cfg.ScenarioIn.String(), "-motion", cfg.Motion)
		}
		p.groups = append(p.groups, []*process{fleet})
	}
	if wan {
		// The sites' namespaces are new, so only the root namespace's
		// ports can be taken.
		p.ports = slices.DeleteFunc(p.ports, func(pt port) bool {
			return pt.n != cfg.PortBase+controlOff && pt.n != cfg.PortBase+tnn.block+postgresPort
		})
	}
	return p
}

func hostIn(hosts map[string]string, name, def string) string {
	if h, ok := hosts[name]; ok {
		return h
	}
	return def
}

func (p *plan) addPort(what string, n int, udp bool) {
	p.ports = append(p.ports, port{n: n, udp: udp, what: what})
}

func (p *plan) processes() []*process {
	var out []*process
	for _, g := range p.groups {
		out = append(out, g...)
	}
	return out
}

func (p *plan) checkBinaries() error {
	for _, name := range append([]string{"shindo"}, binaries...) {
		path := filepath.Join(p.cfg.BinDir, name)
		st, err := os.Stat(path)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("missing binary %s: run `make build` first, or point -bin-dir at the binaries", path)
		}
	}
	return nil
}

// checkPorts names every busy port and what it is for in one error, so a
// user sees the whole conflict at once rather than one port per attempt.
func (p *plan) checkPorts() error {
	var busy []string
	var cause error
	for _, pt := range p.ports {
		addr := hostPort(p.cfg.Host, pt.n)
		var err error
		if pt.udp {
			var c net.PacketConn
			if c, err = net.ListenPacket("udp", addr); err == nil {
				c.Close()
			}
		} else {
			var l net.Listener
			if l, err = net.Listen("tcp", addr); err == nil {
				l.Close()
			}
		}
		if err != nil {
			busy = append(busy, fmt.Sprintf("port %d (%s) is not free", pt.n, pt.what))
			if cause == nil {
				cause = errors.Unwrap(err)
			}
		}
	}
	if len(busy) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w; stop what uses them or choose another -port-base", strings.Join(busy, ", "), cause)
}

// endpoints is the document written to endpoints.json: for each site by
// name, every service with the address of each of its listeners and its
// process ID; the fleet under "fleet".
func (p *plan) endpoints(pid func(*process) int) map[string]any {
	doc := map[string]any{}
	for _, pr := range p.processes() {
		entry := map[string]any{"pid": pid(pr)}
		for k, v := range pr.listeners {
			entry[k] = v
		}
		if pr.role == "fleet" {
			entry["stations"] = p.cfg.Stations
			doc["fleet"] = entry
			continue
		}
		s, ok := doc[pr.site].(map[string]any)
		if !ok {
			role := "edge"
			if pr.site == tnn.name || pr.site == tyo.name {
				role = "core"
			}
			s = map[string]any{"role": role}
			doc[pr.site] = s
		}
		s[pr.role] = entry
	}
	return doc
}

// webScheme is the scheme of the edges' public URLs and the data APIs'.
func (p *plan) webScheme() string {
	if p.cfg.TLS {
		return "https"
	}
	return "http"
}

// certPlan is a certificate to issue: for whom, for which addresses, and
// where its files go.
type certPlan struct {
	site, role, certFile, keyFile string
	hosts                         []string
	// caCopy, when set, is where the CA's certificate is copied beside
	// it; owner, when set, is who the files are given to (a process run
	// as another user).
	caCopy string
	owner  *syscall.Credential
	// combined, when set, is a file holding the certificate and then its
	// key, for a program that reads them so (HAProxy's crt).
	combined string
}

// issue plans the certificate of s's role, for s's address and
// localhost, and returns where its files will be; one per site and role,
// for the public listeners and the internal hops alike.
func (p *plan) issue(s site, role string) (certFile, keyFile string) {
	return p.issueFor(s.name, role, p.host(s.name), "localhost")
}

func (p *plan) issueFor(site, role string, hosts ...string) (certFile, keyFile string) {
	dir := filepath.Join(p.cfg.Dir, "tls")
	c := certPlan{site: site, role: role, hosts: hosts,
		certFile: filepath.Join(dir, site+"-"+role+".pem"), keyFile: filepath.Join(dir, site+"-"+role+"-key.pem")}
	for _, have := range p.certs {
		if have.site == site && have.role == role {
			return have.certFile, have.keyFile
		}
	}
	p.certs = append(p.certs, c)
	return c.certFile, c.keyFile
}

// dbTLSQuery is the query of a database URL: under -tls TLS with the dev
// CA, and cert and key when given (otherwise the client takes them from
// PGSSLCERT and PGSSLKEY); plain otherwise.
func dbTLSQuery(cfg Config, cert, key string) string {
	if !cfg.TLS {
		return "sslmode=disable"
	}
	q := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {filepath.Join(cfg.Dir, "tls", "ca.pem")}}
	if cert != "" {
		q["sslcert"], q["sslkey"] = []string{cert}, []string{key}
	}
	return q.Encode()
}

// dbClientEnv hands a service its certificate for the database under
// -tls.
func (p *plan) dbClientEnv(s site, role string) []string {
	if !p.cfg.TLS {
		return nil
	}
	cert, key := p.issue(s, role)
	return []string{"PGSSLCERT=" + cert, "PGSSLKEY=" + key}
}

// operatorSite is the site an operator's certificate names: the tools of
// shindo dev (chaos, witness, grpcurl by hand) run at no site of the
// network.
const operatorSite = "dev"

func (p *plan) summary() []string {
	var entrances []string
	for _, e := range edges {
		entrances = append(entrances, p.webScheme()+"://"+hostPort(p.host(e.name), p.cfg.PortBase+e.block+edgeHTTP))
	}
	curl := "curl -N"
	if p.cfg.TLS {
		curl = "curl -N --cacert " + p.caFile
	}
	return []string{
		"dashboard: " + entrances[0] + "/ or " + entrances[1] + "/",
		"live RTS stream: " + curl + " '" + entrances[0] + "/api/v2/trem/rts?sse=1'",
		"data API (routed to the cores): " + entrances[0] + "/v1/stations or " + entrances[1] + "/v1/stations",
		"endpoints: " + p.endpointsFile + ", stations and keys: " + p.stationsFile + ", logs: " + filepath.Join(p.cfg.Dir, "logs"),
	}
}
