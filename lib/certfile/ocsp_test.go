package certfile

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"shindo.dev/devkit/pki"
	"shindo.dev/devkit/poll"
)

// responder is an OCSP responder of the test CA answering good, or
// revoked once told to.
type responder struct {
	ca       *pki.CA
	revoked  atomic.Bool
	requests atomic.Int32
}

func (o *responder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	req, err := ocsp.ParseRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tmpl := ocsp.Response{Status: ocsp.Good, SerialNumber: req.SerialNumber,
		ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour)}
	if o.revoked.Load() {
		tmpl.Status, tmpl.RevokedAt, tmpl.RevocationReason = ocsp.Revoked, time.Now().Add(-time.Minute), ocsp.KeyCompromise
	}
	resp, err := ocsp.CreateResponse(o.ca.Cert, o.ca.Cert, tmpl, o.ca.Key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/ocsp-response")
	w.Write(resp)
}

// TestOCSPStapling: a certificate naming a responder, with its issuer in
// the file, is served with the responder's good answer stapled; a revoked
// one is served without a staple and counted; one naming no responder
// costs no request.
func TestOCSPStapling(t *testing.T) {
	f := newFiles(t)
	o := &responder{ca: f.ca}
	srv := httptest.NewServer(o)
	defer srv.Close()
	issue := func(ocspServer ...string) {
		t.Helper()
		is, err := f.ca.Issue(pki.Request{Identity: pki.Identity{Site: "TPE-1", Role: "edge"}, Hosts: []string{"127.0.0.1"},
			Validity: time.Hour, OCSPServer: ocspServer})
		if err != nil {
			t.Fatal(err)
		}
		// The chain: the certificate, then its issuer.
		if err := Write(f.cert, f.key, append(append([]byte{}, is.CertPEM...), f.ca.PEM...), is.KeyPEM); err != nil {
			t.Fatal(err)
		}
	}
	issue(srv.URL)
	r, err := Load(f.cert, f.key, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.Run(ctx, 50*time.Millisecond)
	poll.Until(t, 5*time.Second, "the OCSP response stapled", r.Stapled)
	addr := serve(t, r)
	c := f.dial(t, addr)
	staple := c.ConnectionState().OCSPResponse
	if resp, err := ocsp.ParseResponse(staple, f.ca.Cert); err != nil || resp.Status != ocsp.Good {
		t.Fatalf("the handshake's OCSP response: %v %v", resp, err)
	}

	o.revoked.Store(true)
	issue(srv.URL)
	poll.Until(t, 5*time.Second, "the revoked certificate's fetch failed", func() bool { return r.StapleFailures() > 0 })
	if r.Stapled() {
		t.Error("a revoked certificate was stapled")
	}
	if st := f.dial(t, addr).ConnectionState(); len(st.OCSPResponse) != 0 {
		t.Error("a handshake carried a staple for a revoked certificate")
	}

	issue()
	poll.Until(t, 5*time.Second, "the certificate without a responder loaded", func() bool { return len(r.Leaf().OCSPServer) == 0 })
	before := o.requests.Load()
	//nolint:forbidigo // several looks of Run: none may ask a responder
	time.Sleep(300 * time.Millisecond)
	if n := o.requests.Load(); n != before {
		t.Errorf("%d OCSP requests for a certificate naming no responder", n-before)
	}
}
