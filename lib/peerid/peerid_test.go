package peerid

import (
	"crypto/x509"
	"net/url"
	"testing"
	"time"

	"shindo.dev/devkit/pki"
)

// TestOfReadsWhatIsIssued: the identity devkit/pki (shindo dev -tls,
// shindo cert) writes into a certificate is the one read here.
func TestOfReadsWhatIsIssued(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	is, err := ca.Issue(pki.Request{Identity: pki.Identity{Site: "TNN-1", Role: Ingest}, Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := Of(is.Cert); !ok || id != (Identity{Site: "TNN-1", Role: Ingest}) {
		t.Fatalf("identity %v %v", id, ok)
	}
}

func TestOfNeedsExactlyOne(t *testing.T) {
	t.Parallel()
	u := func(s string) *url.URL { p, _ := url.Parse(s); return p }
	for _, c := range []struct {
		uris []*url.URL
		ok   bool
	}{
		{nil, false},
		{[]*url.URL{u("shindo://TPE-1/edge")}, true},
		{[]*url.URL{u("spiffe://TPE-1/edge")}, false},
		{[]*url.URL{u("shindo://TPE-1/")}, false},
		{[]*url.URL{u("shindo://TPE-1/edge/x")}, false},
		{[]*url.URL{u("shindo://user@TPE-1/edge")}, false},
		{[]*url.URL{u("shindo://TPE-1/edge?role=operator")}, false},
		{[]*url.URL{u("shindo://TPE-1/edge"), u("shindo://TNN-1/ingest")}, false},
		{[]*url.URL{u("shindo://TPE-1/edge"), u("https://example.org/")}, true},
	} {
		if _, ok := Of(&x509.Certificate{URIs: c.uris}); ok != c.ok {
			t.Errorf("%v: identity found %v, want %v", c.uris, ok, c.ok)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	p := Policy{
		"/shindo.rts.v1.RTSService/":       Allow(Edge, DataAPI),
		"/shindo.rts.v1.RTSService/Ingest": AllowSameSite(Ingest),
		"/grpc.health.v1.Health/":          Anyone(),
	}
	for _, c := range []struct {
		id     Identity
		method string
		ok     bool
	}{
		{Identity{"TPE-1", Edge}, "/shindo.rts.v1.RTSService/Subscribe", true},
		{Identity{"TPE-1", Edge}, "/shindo.rts.v1.RTSService/Ingest", false},
		{Identity{"TNN-1", Ingest}, "/shindo.rts.v1.RTSService/Ingest", true},
		{Identity{"TYO-1", Ingest}, "/shindo.rts.v1.RTSService/Ingest", false},
		{Identity{"TNN-1", Ingest}, "/shindo.rts.v1.RTSService/Subscribe", false},
		{Identity{"X", "anything"}, "/grpc.health.v1.Health/Check", true},
		{Identity{"TPE-1", Edge}, "/shindo.waveform.v1.WaveformService/Live", false},
		{Identity{"TPE-1", Edge}, "nonsense", false},
	} {
		if err := p.Check(c.id, "TNN-1", c.method); (err == nil) != c.ok {
			t.Errorf("%s calling %s at TNN-1: %v, want allowed %v", c.id, c.method, err, c.ok)
		}
	}
}
