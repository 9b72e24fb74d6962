package certfile

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"golang.org/x/crypto/ocsp"
)

// OCSP stapling: when the certificate in use names an OCSP responder and
// its file holds the issuer after it, the responder's signed answer that
// the certificate is good is fetched and handed to clients in the
// handshake, so a browser need not ask the CA itself (slower, and telling
// the CA who visits).
const (
	// maxOCSPResponse bounds what is read from a responder.
	maxOCSPResponse = 64 << 10
	// ocspTimeout bounds one request to it.
	ocspTimeout = 10 * time.Second
	// ocspRetry is how soon a failed fetch is tried again.
	ocspRetry = time.Minute
	// ocspDefaultRefresh is when a response without a NextUpdate is
	// fetched again.
	ocspDefaultRefresh = time.Hour
)

// stapleState is the stapling of the certificate in use.
type stapleState struct {
	cert    *tls.Certificate // the certificate it was fetched for
	next    time.Time        // when to fetch again
	expires time.Time        // the staple's NextUpdate (zero: none)
}

// Stapled reports whether the certificate in use carries an OCSP response.
func (r *Reloader) Stapled() bool { return len(r.cur.Load().OCSPStaple) > 0 }

// StapleFailures counts OCSP fetches that failed or answered other than
// good.
func (r *Reloader) StapleFailures() int64 { return r.stapleFailures.Load() }

// staple fetches an OCSP response for the certificate in use when it
// names a responder and its last response is due for renewal. On failure
// the certificate stays as it was (with its previous staple, while that
// is valid) and the fetch is tried again after ocspRetry.
func (r *Reloader) staple(ctx context.Context) {
	cur := r.cur.Load()
	now := time.Now()
	r.mu.Lock()
	due := r.stapling.cert != cur || !now.Before(r.stapling.next)
	expires := r.stapling.expires
	r.mu.Unlock()
	if !due || len(cur.Leaf.OCSPServer) == 0 {
		return
	}
	resp, raw, err := r.fetchOCSP(ctx, cur)
	next := now.Add(ocspRetry)
	if err != nil {
		r.stapleFailures.Add(1)
		r.log.WarnContext(ctx, "OCSP response not fetched; clients check the certificate themselves", slog.Any("err", err))
		if len(cur.OCSPStaple) > 0 && !expires.IsZero() && now.After(expires) {
			// An expired staple is worse than none: clients refuse it.
			unstapled := *cur
			unstapled.OCSPStaple = nil
			if !r.cur.CompareAndSwap(cur, &unstapled) {
				return
			}
			cur, expires = &unstapled, time.Time{}
		}
	} else {
		next = now.Add(ocspDefaultRefresh)
		if !resp.NextUpdate.IsZero() {
			next = resp.ThisUpdate.Add(resp.NextUpdate.Sub(resp.ThisUpdate) / 2)
		}
		stapled := *cur
		stapled.OCSPStaple = raw
		// Only over the certificate it was fetched for: a reload in
		// between wins, and is stapled at the next look.
		if !r.cur.CompareAndSwap(cur, &stapled) {
			return
		}
		cur, expires = &stapled, resp.NextUpdate
		r.log.InfoContext(ctx, "OCSP response stapled", slog.Time("this_update", resp.ThisUpdate), slog.Time("next_update", resp.NextUpdate))
	}
	r.mu.Lock()
	r.stapling = stapleState{cert: cur, next: next, expires: expires}
	r.mu.Unlock()
}

// fetchOCSP asks the leaf's responder about it and returns the response
// if it says good.
func (r *Reloader) fetchOCSP(ctx context.Context, cert *tls.Certificate) (*ocsp.Response, []byte, error) {
	leaf := cert.Leaf
	if len(cert.Certificate) < 2 {
		return nil, nil, fmt.Errorf("%s names an OCSP responder but holds no issuer after the certificate", r.certFile)
	}
	issuer, err := x509.ParseCertificate(cert.Certificate[1])
	if err != nil {
		return nil, nil, fmt.Errorf("the issuer in %s: %w", r.certFile, err)
	}
	req, err := ocsp.CreateRequest(leaf, issuer, nil)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ocspTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, leaf.OCSPServer[0], bytes.NewReader(req))
	if err != nil {
		return nil, nil, err
	}
	hreq.Header.Set("Content-Type", "application/ocsp-request")
	hresp, err := r.ocspClient.Do(hreq)
	if err != nil {
		return nil, nil, err
	}
	defer hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("OCSP responder %s: %s", leaf.OCSPServer[0], hresp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(hresp.Body, maxOCSPResponse+1))
	if err != nil {
		return nil, nil, err
	}
	if len(raw) > maxOCSPResponse {
		return nil, nil, fmt.Errorf("OCSP responder %s: response over %d bytes", leaf.OCSPServer[0], maxOCSPResponse)
	}
	resp, err := ocsp.ParseResponseForCert(raw, leaf, issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP responder %s: %w", leaf.OCSPServer[0], err)
	}
	switch resp.Status {
	case ocsp.Good:
		return resp, raw, nil
	case ocsp.Revoked:
		return nil, nil, fmt.Errorf("the CA says certificate %s is REVOKED (since %s): replace it", r.certFile, resp.RevokedAt.Format(time.RFC3339))
	}
	return nil, nil, errors.New("the OCSP responder does not know the certificate")
}
