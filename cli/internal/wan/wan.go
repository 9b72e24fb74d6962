// Package wan builds the network `shindo dev -wan` runs the topology on:
// each site (the cores, the edges, the stations) in a Linux network
// namespace of its own with one address, joined to the others through a
// packet router that gives every pair of sites the one-way delay, jitter
// and loss of a netprofile.Shape in each direction. The processes of a
// site run in its namespace (Command), so each connection between sites
// crosses a real IP path with kernel TCP and UDP at both ends: a lost
// segment is sent again by TCP, a station's datagram is simply gone.
//
// Each namespace holds a TUN device, wan0, addressed 10.N.i.2/16 (N picked
// per run among the /16s this machine does not use, i the site's index);
// the router reads what every site sends from its TUN and writes it to the
// destination's after the direction's delay. The root namespace gets a
// TUN too, shindo<pid> at 10.N.0.2, with the route to the /16: it is "the
// internet", where browsers, curl and tests reach the edges and the
// services without impairment.
//
// Why a router in shindo dev rather than veth pairs and tc netem: netem
// is a kernel module that many kernels and containers lack (the one this
// was written on has neither sch_netem nor sch_prio), while TUN is nearly
// everywhere; and the router applies netprofile's shapes with their exact
// meaning (jitter drawn from [0, Jitter), no reordering), switches typhoon's
// phases without a tc call, and counts each direction's packets and drops.
//
// Namespaces are named shindo<pid>-<site> after the process that made
// them: Build first removes those of a shindo that is no longer running,
// so a run killed outright leaves nothing behind for long; Close removes
// its own. The TUN devices vanish with the process holding them. Building
// needs root, ip (iproute2) and /dev/net/tun; Check says what is missing.
package wan

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"shindo.dev/cli/internal/netprofile"
)

// Site is one site of the network.
type Site struct {
	// Name is the topology's name for it: TNN-1, …, or stations.
	Name string
	// Netns is its network namespace, Addr its address there.
	Netns string
	Addr  netip.Addr
	index byte
}

// Net is a built network.
type Net struct {
	// Prefix is the /16 the sites are addressed in.
	Prefix netip.Prefix
	// Root is the root namespace's interface into the network and
	// RootAddr its address.
	Root     string
	RootAddr netip.Addr

	ip     string
	sites  []Site
	router *Router
	log    *slog.Logger
}

// ErrUnavailable wraps what Check finds missing.
var ErrUnavailable = errors.New("network namespaces are not available")

// Check reports whether this process can build a network: Linux, root,
// the ip command and /dev/net/tun.
func Check() error {
	if err := checkSystem(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: they need root (run shindo dev -wan as root)", ErrUnavailable)
	}
	if _, err := ipCommand(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// ipCommand finds iproute2's ip, also where root's PATH usually has it
// when this process's PATH does not.
func ipCommand() (string, error) {
	if p, err := exec.LookPath("ip"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("no ip command (iproute2): apt-get install iproute2")
}

// Build makes a namespace for each of sites (by index: the site's
// addresses are 10.N.index.0/24; 0 is the root namespace's) and starts
// the router, every direction clear. Close undoes it.
func Build(sites map[string]byte, log *slog.Logger) (_ *Net, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	ip, _ := ipCommand()
	RemoveStale(log)
	prefix, err := freePrefix()
	if err != nil {
		return nil, err
	}
	pid := os.Getpid()
	n := &Net{Prefix: prefix, Root: "shindo" + strconv.Itoa(pid), ip: ip, router: NewRouter(prefix), log: log}
	n.RootAddr = addrIn(prefix, 0)
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	for name, i := range sites {
		if i == 0 {
			return nil, fmt.Errorf("site %s: index 0 is the root namespace's", name)
		}
		n.sites = append(n.sites, Site{Name: name, Netns: NamespaceName(pid, name), Addr: addrIn(prefix, i), index: i})
	}
	root, err := openTUN(n.Root)
	if err != nil {
		return nil, fmt.Errorf("root interface %s: %w", n.Root, err)
	}
	n.router.Add(0, root)
	if err := n.run("addr", "add", n.RootAddr.String()+"/16", "dev", n.Root); err != nil {
		return nil, err
	}
	if err := n.run("link", "set", "dev", n.Root, "txqueuelen", txQueueLen, "up"); err != nil {
		return nil, err
	}
	for _, s := range n.sites {
		if err := n.run("netns", "add", s.Netns); err != nil {
			return nil, err
		}
		if err := n.run("-n", s.Netns, "link", "set", "dev", "lo", "up"); err != nil {
			return nil, err
		}
		var tun *os.File
		if err := inNetns(s.Netns, func() (err error) { tun, err = openTUN("wan0"); return err }); err != nil {
			return nil, fmt.Errorf("%s: wan0: %w", s.Netns, err)
		}
		n.router.Add(s.index, tun)
		if err := n.run("-n", s.Netns, "addr", "add", s.Addr.String()+"/16", "dev", "wan0"); err != nil {
			return nil, err
		}
		if err := n.run("-n", s.Netns, "link", "set", "dev", "wan0", "txqueuelen", txQueueLen, "up"); err != nil {
			return nil, err
		}
	}
	n.router.Start()
	log.Info("network namespaces up", slog.String("prefix", prefix.String()), slog.String("root_interface", n.Root),
		slog.Int("sites", len(n.sites)))
	return n, nil
}

// txQueueLen is how many packets a site's TUN device holds for the router
// to read. The driver's default, 500, lost a quarter of the fleet's packets
// on a clear link: 1,000 stations send each tick's frames in one burst of
// some 4,000 datagrams, faster than the router reads them, and a full
// device drops the rest (its TX dropped counter) before any shape applies.
// A real site's uplink buffers such a burst; this holds about four.
const txQueueLen = "16384"

// addrIn is the address of site index i in prefix: 10.N.i.2.
func addrIn(prefix netip.Prefix, i byte) netip.Addr {
	a := prefix.Addr().As4()
	a[2], a[3] = i, 2
	return netip.AddrFrom4(a)
}

// freePrefix picks 10.N.0.0/16, N from 77, that no interface of the root
// namespace has an address in (another shindo dev -wan holds one while it
// runs).
func freePrefix() (netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list addresses: %w", err)
	}
	for n := 77; n < 127; n++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n), 0, 0}), 16)
		used := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok && p.Contains(ip.Unmap()) {
					used = true
				}
			}
		}
		if !used {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no free /16 in 10.77.0.0–10.126.0.0 for the sites")
}

// NamespaceName is the namespace of site for the shindo running as pid:
// shindo<pid>-<site in lower case, without dashes>.
func NamespaceName(pid int, site string) string {
	return fmt.Sprintf("shindo%d-%s", pid, strings.ToLower(strings.ReplaceAll(site, "-", "")))
}

var namespaceRE = regexp.MustCompile(`^shindo([0-9]+)-[a-z0-9]+$`)

// RemoveStale deletes the namespaces of shindo processes that are gone.
func RemoveStale(log *slog.Logger) {
	ip, err := ipCommand()
	if err != nil {
		return
	}
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		m := namespaceRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if ownerAlive(pid) {
			continue
		}
		if b, err := exec.Command(ip, "netns", "delete", name).CombinedOutput(); err != nil {
			log.Warn("stale network namespace not removed", slog.String("netns", name), slog.String("error", strings.TrimSpace(string(b))))
			continue
		}
		log.Info("removed the network namespace of a shindo no longer running", slog.String("netns", name), slog.Int("pid", pid))
	}
}

// ownerAlive tells whether pid is a running shindo (a pid reused by
// another program does not count).
func ownerAlive(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(comm)) == "shindo"
}

func (n *Net) run(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(n.ip, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Sites lists the sites.
func (n *Net) Sites() []Site { return append([]Site(nil), n.sites...) }

// Site returns the site called name.
func (n *Net) Site(name string) (Site, bool) {
	for _, s := range n.sites {
		if s.Name == name {
			return s, true
		}
	}
	return Site{}, false
}

// Command is bin with args run in site's namespace: ip netns exec, which
// execs bin in place, so the process ID is bin's own. A site the network
// does not have runs in the root namespace.
func (n *Net) Command(site, bin string, args []string) (string, []string) {
	s, ok := n.Site(site)
	if !ok {
		return bin, args
	}
	return n.ip, append([]string{"netns", "exec", s.Netns, bin}, args...)
}

// Listen opens a listener in site's namespace, for this process to serve
// there.
func (n *Net) Listen(site, network, addr string) (net.Listener, error) {
	s, ok := n.Site(site)
	if !ok {
		return nil, fmt.Errorf("no site %s", site)
	}
	var ln net.Listener
	err := inNetns(s.Netns, func() (err error) { ln, err = net.Listen(network, addr); return err })
	return ln, err
}

// index of a site by name; the root namespace is "" (index 0).
func (n *Net) index(name string) (byte, error) {
	if name == "" {
		return 0, nil
	}
	s, ok := n.Site(name)
	if !ok {
		return 0, fmt.Errorf("no site %s", name)
	}
	return s.index, nil
}

// Set gives the traffic from site from to site to the shape s.
func (n *Net) Set(from, to string, s netprofile.Shape) error {
	a, err := n.index(from)
	if err != nil {
		return err
	}
	b, err := n.index(to)
	if err != nil {
		return err
	}
	return n.router.Set(a, b, s)
}

// Stats counts the traffic from site from to site to.
func (n *Net) Stats(from, to string) DirStats {
	a, errA := n.index(from)
	b, errB := n.index(to)
	if errA != nil || errB != nil {
		return DirStats{}
	}
	return n.router.Stats(a, b)
}

// Close stops the router, which removes the TUN devices, and deletes the
// namespaces. Stop the processes in them first: a namespace a process
// still runs in outlives its name.
func (n *Net) Close() error {
	n.router.Close()
	var errs []error
	for _, s := range n.sites {
		if err := exec.Command(n.ip, "netns", "delete", s.Netns).Run(); err != nil {
			if _, statErr := os.Stat("/run/netns/" + s.Netns); statErr == nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", s.Netns, err))
			}
		}
	}
	return errors.Join(errs...)
}
