package devstack

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"

	"shindo.dev/cli/internal/proc"
	"shindo.dev/lib/registry"
	"shindo.dev/lib/township"
)

// The port plan: each site owns a block of 100 ports from the base, and
// each service a fixed offset inside its block.
const (
	portSpan = 1000

	blockTNN = 0
	blockTPE = 200
	fleetOff = 900

	ingestUDP, ingestWS, ingestGRPC, ingestAdmin = 0, 1, 2, 3
	rtsGRPC, rtsAdmin                            = 10, 11
	waveformGRPC, waveformAdmin                  = 20, 21
	dataHTTP, dataGRPC, dataAdmin                = 30, 31, 32
	edgeHTTP, edgeGRPC, edgeAdmin                = 0, 1, 2
)

// binaries are the executables the topology needs, besides shindo itself.
var binaries = []string{"shindo-ingest", "shindo-rts", "shindo-waveform", "shindo-dataapi", "shindo-edge"}

type process struct {
	name     string // e.g. "TNN-1-rts"; also the log file name
	bin      string
	args     []string
	readyURL string
	proc     *proc.Proc
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

	rts, waveform, dataapi, ingest, edge, sim *process
}

func newPlan(cfg Config) *plan {
	p := &plan{
		cfg:           cfg,
		stationsFile:  filepath.Join(cfg.Dir, "stations.json"),
		endpointsFile: filepath.Join(cfg.Dir, "endpoints.json"),
	}
	tnn := func(off int) string { return hostPort(cfg.Host, cfg.PortBase+blockTNN+off) }
	tpe := func(off int) string { return hostPort(cfg.Host, cfg.PortBase+blockTPE+off) }
	bin := func(name string) string { return filepath.Join(cfg.BinDir, name) }
	common := func(site, grpcAddr, adminAddr string) []string {
		return []string{"-site", site, "-grpc-addr", grpcAddr, "-admin-addr", adminAddr, "-log-level", cfg.LogLevel, "-shutdown-timeout", "8s"}
	}
	ready := func(adminAddr string) string { return "http://" + adminAddr + "/readyz" }

	p.rts = &process{name: "TNN-1-rts", bin: bin("shindo-rts"),
		args:     append(common("TNN-1", tnn(rtsGRPC), tnn(rtsAdmin)), "-registry", p.stationsFile),
		readyURL: ready(tnn(rtsAdmin))}
	p.waveform = &process{name: "TNN-1-waveform", bin: bin("shindo-waveform"),
		args:     common("TNN-1", tnn(waveformGRPC), tnn(waveformAdmin)),
		readyURL: ready(tnn(waveformAdmin))}
	p.dataapi = &process{name: "TNN-1-dataapi", bin: bin("shindo-dataapi"),
		args:     append(common("TNN-1", tnn(dataGRPC), tnn(dataAdmin)), "-http-addr", tnn(dataHTTP), "-registry", p.stationsFile),
		readyURL: ready(tnn(dataAdmin))}
	p.ingest = &process{name: "TNN-1-ingest", bin: bin("shindo-ingest"),
		args: append(common("TNN-1", tnn(ingestGRPC), tnn(ingestAdmin)),
			"-udp-addr", tnn(ingestUDP), "-ws-addr", tnn(ingestWS), "-registry", p.stationsFile,
			"-rts", tnn(rtsGRPC), "-waveform", tnn(waveformGRPC)),
		readyURL: ready(tnn(ingestAdmin))}
	p.edge = &process{name: "TPE-1-edge", bin: bin("shindo-edge"),
		args:     append(common("TPE-1", tpe(edgeGRPC), tpe(edgeAdmin)), "-http-addr", tpe(edgeHTTP), "-rts", tnn(rtsGRPC)),
		readyURL: ready(tpe(edgeAdmin))}
	fleetStatus := hostPort(cfg.Host, cfg.PortBase+fleetOff)
	p.sim = &process{name: "fleet", bin: bin("shindo"),
		args:     []string{"sim", "-stations-file", p.stationsFile, "-primary", tnn(ingestUDP), "-status-addr", fleetStatus, "-log-format", "json", "-log-level", cfg.LogLevel},
		readyURL: "http://" + fleetStatus + "/status"}
	if cfg.Scenario != "" {
		p.sim.args = append(p.sim.args, "-scenario", cfg.Scenario, "-scenario-in", cfg.ScenarioIn.String())
	}
	return p
}

// groups are started in order; each waits for the one before to be ready.
func (p *plan) groups() [][]*process {
	g := [][]*process{{p.rts, p.waveform, p.dataapi}, {p.ingest}, {p.edge}}
	if p.cfg.Simulate {
		g = append(g, []*process{p.sim})
	}
	return g
}

func (p *plan) ports() []port {
	b := p.cfg.PortBase
	ps := []port{
		{b + blockTNN + ingestUDP, true, "TNN-1 ingest UDP"},
		{b + blockTNN + ingestWS, false, "TNN-1 ingest WebSocket"},
		{b + blockTNN + ingestGRPC, false, "TNN-1 ingest gRPC"},
		{b + blockTNN + ingestAdmin, false, "TNN-1 ingest admin"},
		{b + blockTNN + rtsGRPC, false, "TNN-1 rts gRPC"},
		{b + blockTNN + rtsAdmin, false, "TNN-1 rts admin"},
		{b + blockTNN + waveformGRPC, false, "TNN-1 waveform gRPC"},
		{b + blockTNN + waveformAdmin, false, "TNN-1 waveform admin"},
		{b + blockTNN + dataHTTP, false, "TNN-1 data API HTTP"},
		{b + blockTNN + dataGRPC, false, "TNN-1 data API gRPC"},
		{b + blockTNN + dataAdmin, false, "TNN-1 data API admin"},
		{b + blockTPE + edgeHTTP, false, "TPE-1 edge HTTP"},
		{b + blockTPE + edgeGRPC, false, "TPE-1 edge gRPC"},
		{b + blockTPE + edgeAdmin, false, "TPE-1 edge admin"},
	}
	if p.cfg.Simulate {
		ps = append(ps, port{b + fleetOff, false, "fleet status"})
	}
	return ps
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

// checkPorts fails on the first busy port, naming what it is for.
func (p *plan) checkPorts() error {
	for _, pt := range p.ports() {
		addr := hostPort(p.cfg.Host, pt.n)
		if pt.udp {
			c, err := net.ListenPacket("udp", addr)
			if err != nil {
				return fmt.Errorf("port %d (%s) is not free: %w; stop what uses it or choose another -port-base", pt.n, pt.what, errors.Unwrap(err))
			}
			c.Close()
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("port %d (%s) is not free: %w; stop what uses it or choose another -port-base", pt.n, pt.what, errors.Unwrap(err))
		}
		l.Close()
	}
	return nil
}

// endpoints is the document written to endpoints.json: for each site, the
// address of every listener of every service, and the process IDs.
func (p *plan) endpoints(pid func(*process) int) map[string]any {
	b := p.cfg.PortBase
	h := p.cfg.Host
	addr := func(off int) string { return hostPort(h, b+off) }
	url := func(scheme string, off int) string { return scheme + "://" + addr(off) }
	doc := map[string]any{
		"TNN-1": map[string]any{
			"role": "core",
			"ingest": map[string]any{
				"udp": addr(blockTNN + ingestUDP), "ws": url("ws", blockTNN+ingestWS) + "/v1/station/ws",
				"grpc": addr(blockTNN + ingestGRPC), "admin": url("http", blockTNN+ingestAdmin), "pid": pid(p.ingest),
			},
			"rts": map[string]any{
				"grpc": addr(blockTNN + rtsGRPC), "admin": url("http", blockTNN+rtsAdmin), "pid": pid(p.rts),
			},
			"waveform": map[string]any{
				"grpc": addr(blockTNN + waveformGRPC), "admin": url("http", blockTNN+waveformAdmin), "pid": pid(p.waveform),
			},
			"dataapi": map[string]any{
				"http": url("http", blockTNN+dataHTTP), "grpc": addr(blockTNN + dataGRPC),
				"admin": url("http", blockTNN+dataAdmin), "pid": pid(p.dataapi),
			},
		},
		"TPE-1": map[string]any{
			"role": "edge",
			"edge": map[string]any{
				"http": url("http", blockTPE+edgeHTTP), "grpc": addr(blockTPE + edgeGRPC),
				"admin": url("http", blockTPE+edgeAdmin), "pid": pid(p.edge),
			},
		},
	}
	if p.cfg.Simulate {
		doc["fleet"] = map[string]any{"status": url("http", fleetOff) + "/status", "pid": pid(p.sim), "stations": p.cfg.Stations}
	}
	return doc
}

func (p *plan) summary() []string {
	edge := "http://" + hostPort(p.cfg.Host, p.cfg.PortBase+blockTPE+edgeHTTP)
	return []string{
		"live RTS stream: curl -N '" + edge + "/api/v2/trem/rts?sse=1'",
		"data API: http://" + hostPort(p.cfg.Host, p.cfg.PortBase+blockTNN+dataHTTP) + "/v1/stations",
		"endpoints: " + p.endpointsFile + ", stations and keys: " + p.stationsFile + ", logs: " + filepath.Join(p.cfg.Dir, "logs"),
	}
}

// provision creates n stations spread over Taiwan's townships, each with a
// fresh random key.
func provision(n int) ([]*registry.Station, error) {
	towns := township.All()
	out := make([]*registry.Station, n)
	for i := range n {
		t := towns[i%len(towns)]
		// Stations sharing a township are spread on a small spiral around
		// its seat (about 2 km apart), deterministic by index.
		round := i / len(towns)
		angle := float64(round) * 2.4
		r := 0.02 * math.Sqrt(float64(round))
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate station key: %w", err)
		}
		out[i] = &registry.Station{
			ID:     fmt.Sprintf("SIM%05d", i+1),
			Name:   fmt.Sprintf("%s %d", t.Name, round+1),
			Net:    "SIM",
			Lat:    math.Round((t.Lat+r*math.Sin(angle))*1e4) / 1e4,
			Lon:    math.Round((t.Lon+r*math.Cos(angle))*1e4) / 1e4,
			Code:   t.Code,
			KeyID:  1,
			KeyHex: hex.EncodeToString(key),
		}
	}
	return out, nil
}
