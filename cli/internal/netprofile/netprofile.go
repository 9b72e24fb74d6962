// Package netprofile names the network conditions shindo's links can be put
// under, as data independent of how they are applied: `shindo dev` applies
// them on loopback through in-process proxies (devkit/faultproxy), and with
// -wan to the traffic between the sites' network namespaces
// (cli/internal/wan).
//
// A Link is one path of the topology with the one-way delay of its real
// route (stations → TNN-1 8 ms, stations → TYO-1 30 ms, TNN-1 ↔ TYO-1
// 35 ms, edges ↔ cores 3–20 ms). A Profile gives a link the Phases it goes
// through: each a Shape per direction (delay, jitter, loss, blackhole) held
// for a while. A profile of one phase holds for ever; one of several cycles
// through them, which is how bursts are described: typhoon alternates rain
// with gusts of heavy loss and outages. Start plays the phases of a profile
// through an apply function, whatever it sets.
package netprofile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"shindo.dev/devkit/faultproxy"
)

// Kind is what a link connects.
type Kind string

// Kinds of link.
const (
	// Uplink is stations → a core: UDP, and WebSocket when UDP fails.
	Uplink Kind = "uplink"
	// Intersite is core ↔ core: the cores' NATS connections to each other.
	Intersite Kind = "intersite"
	// Edge is edge ↔ core: the edges' gRPC, NATS and data-API requests.
	Edge Kind = "edge"
)

// Link is one path of the topology. Forward is From → To: station packets
// on an uplink, TNN-1 → TYO-1 between the cores, edge → core.
type Link struct {
	Name     string
	Kind     Kind
	From, To string
	// Delay is the one-way delay of the real route, which the wan
	// profile and those built on it give the link.
	Delay time.Duration
}

// Links are the paths of the topology, uplinks first.
var links = []Link{
	{Name: "uplink-TNN-1", Kind: Uplink, From: "stations", To: "TNN-1", Delay: 8 * time.Millisecond},
	{Name: "uplink-TYO-1", Kind: Uplink, From: "stations", To: "TYO-1", Delay: 30 * time.Millisecond},
	{Name: "intersite", Kind: Intersite, From: "TNN-1", To: "TYO-1", Delay: 35 * time.Millisecond},
	{Name: "edge-TPE-1-TNN-1", Kind: Edge, From: "TPE-1", To: "TNN-1", Delay: 4 * time.Millisecond},
	{Name: "edge-TPE-1-TYO-1", Kind: Edge, From: "TPE-1", To: "TYO-1", Delay: 18 * time.Millisecond},
	{Name: "edge-KHH-1-TNN-1", Kind: Edge, From: "KHH-1", To: "TNN-1", Delay: 3 * time.Millisecond},
	{Name: "edge-KHH-1-TYO-1", Kind: Edge, From: "KHH-1", To: "TYO-1", Delay: 20 * time.Millisecond},
}

// Links returns every link of the topology.
func Links() []Link { return slices.Clone(links) }

// LinkByName returns the link called name.
func LinkByName(name string) (Link, bool) {
	i := slices.IndexFunc(links, func(l Link) bool { return l.Name == name })
	if i < 0 {
		return Link{}, false
	}
	return links[i], true
}

// Shape is what a path does to the traffic going one way. The zero value
// passes everything untouched.
type Shape struct {
	// Delay is the one-way delay; nothing arrives sooner.
	Delay time.Duration
	// Jitter adds a further delay drawn uniformly from [0, Jitter). (For
	// netem, whose jitter is ±: delay Delay+Jitter/2, jitter Jitter/2.)
	Jitter time.Duration
	// Loss is the probability a packet is lost, in [0, 1]. It applies to
	// datagrams; a stream proxied on loopback (a WebSocket uplink, the
	// link between the cores) carries every byte, where netem would drop
	// segments for TCP to send again.
	Loss float64
	// Blackhole loses every datagram and holds every byte of a stream
	// until it clears, as a dead path does.
	Blackhole bool
	// NoUDP loses every UDP datagram and lets streams pass, as a carrier
	// or a firewall that blocks UDP does: the one failure that moves an
	// uplink to WebSocket while the path still works.
	NoUDP bool
}

// Impairment is the shape as devkit/faultproxy applies it.
func (s Shape) Impairment() faultproxy.Impairment {
	return faultproxy.Impairment{Drop: s.Loss, Delay: s.Delay, Jitter: s.Jitter, Blackhole: s.Blackhole}
}

// String describes the shape briefly ("8ms+0.8ms 0.1% loss", "blackhole").
func (s Shape) String() string {
	switch {
	case s.Blackhole:
		return "blackhole"
	case s.NoUDP:
		return "no UDP"
	case s == Shape{}:
		return "clear"
	}
	var parts []string
	if s.Delay > 0 || s.Jitter > 0 {
		d := s.Delay.String()
		if s.Jitter > 0 {
			d += "+" + s.Jitter.String()
		}
		parts = append(parts, d)
	}
	if s.Loss > 0 {
		parts = append(parts, fmt.Sprintf("%g%% loss", s.Loss*100))
	}
	return strings.Join(parts, " ")
}

// Phase is a stretch of time under one shape in each direction.
type Phase struct {
	Name string
	// For is how long the phase lasts; in a profile of one phase, zero:
	// it holds until another profile is applied.
	For           time.Duration
	Forward, Back Shape
}

// Profile is a named network condition.
type Profile struct {
	Name    string
	Summary string
	phases  func(Link) []Phase
}

// Phases are what the profile does to l, in order; after the last comes
// the first again.
func (p Profile) Phases(l Link) []Phase { return p.phases(l) }

// Names of the profiles every link accepts.
const (
	Clear   = "clear"
	WAN     = "wan"
	Lossy   = "lossy"
	Typhoon = "typhoon"
	Cut     = "cut"
	NoUDP   = "no-udp"
)

// steady is one phase, the same both ways, for ever.
func steady(name string, s Shape) []Phase {
	return []Phase{{Name: name, Forward: s, Back: s}}
}

// share is a fraction of a delay, for jitter.
func share(d time.Duration, f float64) time.Duration { return time.Duration(float64(d) * f) }

var profiles = []Profile{
	{Name: Clear, Summary: "no impairment (loopback as it is)",
		phases: func(Link) []Phase { return steady(Clear, Shape{}) }},
	{Name: WAN, Summary: "the real route: its one-way delay, 10 % jitter, 0.1 % loss",
		phases: func(l Link) []Phase {
			return steady(WAN, Shape{Delay: l.Delay, Jitter: share(l.Delay, 0.10), Loss: 0.001})
		}},
	{Name: Lossy, Summary: "a poor path: the route's delay, 25 % jitter, 5 % loss each way",
		phases: func(l Link) []Phase {
			return steady(Lossy, Shape{Delay: l.Delay, Jitter: share(l.Delay, 0.25), Loss: 0.05})
		}},
	{Name: Typhoon, Summary: "a 30 s cycle: 20 s of rain (1 % loss, 20 % jitter), a 6 s gust (twice the delay, 25 % loss), a 4 s outage (blackhole)",
		phases: func(l Link) []Phase {
			rain := Shape{Delay: l.Delay, Jitter: share(l.Delay, 0.20), Loss: 0.01}
			gust := Shape{Delay: 2 * l.Delay, Jitter: l.Delay, Loss: 0.25}
			outage := Shape{Blackhole: true}
			return []Phase{
				{Name: "rain", For: 20 * time.Second, Forward: rain, Back: rain},
				{Name: "gust", For: 6 * time.Second, Forward: gust, Back: gust},
				{Name: "outage", For: 4 * time.Second, Forward: outage, Back: outage},
			}
		}},
	{Name: Cut, Summary: "a dead path: nothing gets through either way",
		phases: func(Link) []Phase { return steady(Cut, Shape{Blackhole: true}) }},
	{Name: NoUDP, Summary: "the route's delay with every UDP datagram lost, streams passing (a carrier or firewall blocking UDP)",
		phases: func(l Link) []Phase { return steady(NoUDP, Shape{Delay: l.Delay, NoUDP: true}) }},
}

// Profiles returns every profile.
func Profiles() []Profile { return slices.Clone(profiles) }

// ErrUnknownProfile is returned for a profile name not in Profiles.
var ErrUnknownProfile = errors.New("unknown profile")

// Lookup returns the profile called name; the error lists those there are.
func Lookup(name string) (Profile, error) {
	i := slices.IndexFunc(profiles, func(p Profile) bool { return p.Name == name })
	if i < 0 {
		return Profile{}, fmt.Errorf("%w %q: profiles are %s", ErrUnknownProfile, name, strings.Join(ProfileNames(), ", "))
	}
	return profiles[i], nil
}

// ProfileNames lists the profiles' names.
func ProfileNames() []string {
	out := make([]string, len(profiles))
	for i, p := range profiles {
		out[i] = p.Name
	}
	return out
}

// Start calls apply with the first phase before it returns and, if there
// are more, with each next one when the one before has lasted its For,
// cycling, on a goroutine of its own. stop ends that; once it returns,
// apply is not called again. Of several phases, those whose For is not
// positive are skipped.
func Start(phases []Phase, apply func(Phase)) (stop func()) {
	if len(phases) > 1 {
		phases = slices.DeleteFunc(slices.Clone(phases), func(p Phase) bool { return p.For <= 0 })
	}
	if len(phases) == 0 {
		return func() {}
	}
	apply(phases[0])
	if len(phases) == 1 {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		timer := time.NewTimer(phases[0].For)
		defer timer.Stop()
		for i := 1; ; i = (i + 1) % len(phases) {
			select {
			case <-quit:
				return
			case <-timer.C:
			}
			apply(phases[i])
			timer.Reset(phases[i].For)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}
