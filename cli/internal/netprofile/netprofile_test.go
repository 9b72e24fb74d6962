package netprofile

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"shindo.dev/devkit/faultproxy"
)

// TestWANDelays: the wan profile gives each link the one-way delay of its
// real route, 10 % jitter and 0.1 % loss, both ways.
func TestWANDelays(t *testing.T) {
	t.Parallel()
	wan, err := Lookup(WAN)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		link  string
		delay time.Duration
	}{
		{"uplink-TNN-1", 8 * time.Millisecond},
		{"uplink-TYO-1", 30 * time.Millisecond},
		{"intersite", 35 * time.Millisecond},
		{"edge-KHH-1-TNN-1", 3 * time.Millisecond},
		{"edge-KHH-1-TYO-1", 20 * time.Millisecond},
	} {
		t.Run(tc.link, func(t *testing.T) {
			l, ok := LinkByName(tc.link)
			if !ok {
				t.Fatalf("no link %s", tc.link)
			}
			ph := wan.Phases(l)
			want := Shape{Delay: tc.delay, Jitter: tc.delay / 10, Loss: 0.001}
			if len(ph) != 1 || ph[0].Forward != want || ph[0].Back != want || ph[0].For != 0 {
				t.Fatalf("phases %+v, want one of %+v for ever", ph, want)
			}
		})
	}
}

// TestProfilesWellFormed: every profile gives every link at least one
// phase, with a name; a cycle's phases all last a while; only clear is
// clear and cut blackholes.
func TestProfilesWellFormed(t *testing.T) {
	t.Parallel()
	for _, p := range Profiles() {
		if p.Summary == "" {
			t.Errorf("%s has no summary", p.Name)
		}
		for _, l := range Links() {
			ph := p.Phases(l)
			if len(ph) == 0 {
				t.Fatalf("%s gives %s no phases", p.Name, l.Name)
			}
			for _, x := range ph {
				if x.Name == "" || (len(ph) > 1 && x.For <= 0) || (len(ph) == 1 && x.For != 0) {
					t.Errorf("%s on %s: phase %+v", p.Name, l.Name, x)
				}
				if x.Forward.Loss < 0 || x.Forward.Loss > 1 || x.Back.Loss < 0 || x.Back.Loss > 1 {
					t.Errorf("%s on %s: loss out of [0, 1]: %+v", p.Name, l.Name, x)
				}
			}
			clear := len(ph) == 1 && ph[0].Forward == (Shape{}) && ph[0].Back == (Shape{})
			if clear != (p.Name == Clear) {
				t.Errorf("%s on %s: clear %v", p.Name, l.Name, clear)
			}
			if cut := ph[0].Forward.Blackhole && ph[0].Back.Blackhole && len(ph) == 1; cut != (p.Name == Cut) {
				t.Errorf("%s on %s: cut %v", p.Name, l.Name, cut)
			}
		}
	}
}

// TestTyphoonBursts: typhoon cycles through rain, a gust of heavy loss and
// an outage, 30 s in all.
func TestTyphoonBursts(t *testing.T) {
	t.Parallel()
	p, err := Lookup(Typhoon)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := LinkByName("uplink-TYO-1")
	ph := p.Phases(l)
	var total time.Duration
	var names []string
	for _, x := range ph {
		total += x.For
		names = append(names, x.Name)
	}
	if strings.Join(names, ",") != "rain,gust,outage" || total != 30*time.Second {
		t.Fatalf("phases %v over %s", names, total)
	}
	if ph[1].Forward.Loss < 0.2 || !ph[2].Forward.Blackhole || !ph[2].Back.Blackhole || ph[0].Forward.Delay != l.Delay {
		t.Fatalf("bursts %+v", ph)
	}
}

func TestLookupUnknown(t *testing.T) {
	t.Parallel()
	_, err := Lookup("monsoon")
	if !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("err %v", err)
	}
	for _, name := range ProfileNames() {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%q does not list %s", err, name)
		}
	}
	if _, ok := LinkByName("uplink-KHH-1"); ok {
		t.Error("a link that does not exist")
	}
}

func TestImpairment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    Shape
		want faultproxy.Impairment
		str  string
	}{
		{Shape{}, faultproxy.Impairment{}, "clear"},
		{Shape{Delay: 8 * time.Millisecond, Jitter: 800 * time.Microsecond, Loss: 0.001},
			faultproxy.Impairment{Delay: 8 * time.Millisecond, Jitter: 800 * time.Microsecond, Drop: 0.001}, "8ms+800µs 0.1% loss"},
		{Shape{Loss: 0.05}, faultproxy.Impairment{Drop: 0.05}, "5% loss"},
		{Shape{Blackhole: true, Delay: time.Second}, faultproxy.Impairment{Blackhole: true, Delay: time.Second}, "blackhole"},
	} {
		if got := tc.s.Impairment(); got != tc.want {
			t.Errorf("%+v: impairment %+v, want %+v", tc.s, got, tc.want)
		}
		if got := tc.s.String(); got != tc.str {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.str)
		}
	}
}

// TestStart: one phase is applied at once and for ever; several cycle in
// order, skipping any of no length; after stop nothing more is applied.
func TestStart(t *testing.T) {
	t.Parallel()
	var got []string
	stop := Start([]Phase{{Name: "only"}}, func(p Phase) { got = append(got, p.Name) })
	stop()
	if len(got) != 1 || got[0] != "only" {
		t.Fatalf("one phase: %v", got)
	}

	applied := make(chan string, 16)
	var mu sync.Mutex
	stopped := false
	stop = Start([]Phase{
		{Name: "a", For: 5 * time.Millisecond},
		{Name: "skipped"},
		{Name: "b", For: time.Millisecond},
	}, func(p Phase) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			t.Errorf("%s applied after stop", p.Name)
		}
		select {
		case applied <- p.Name:
		default:
		}
	})
	if first := <-applied; first != "a" {
		t.Fatalf("first phase %s, not applied before Start returned", first)
	}
	var seq []string
	for range 4 {
		seq = append(seq, <-applied)
	}
	stop()
	mu.Lock()
	stopped = true
	mu.Unlock()
	if strings.Join(seq, ",") != "b,a,b,a" {
		t.Fatalf("cycle %v", seq)
	}
	stop() // a second stop is harmless
}
