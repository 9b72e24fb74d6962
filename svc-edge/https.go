package edge

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"shindo.dev/lib/certfile"
	"shindo.dev/lib/service"
)

// listenPublic binds the public listener: HTTPS when a certificate is
// configured, with a plain-HTTP listener beside it if asked for that
// redirects to it (or serves everything, where configured); plain HTTP
// otherwise.
func listenPublic(svc *service.Service, cfg Config, h http.Handler) error {
	var opts []service.ListenOption
	if cfg.HTTPShared {
		// Each process is a whole edge: it subscribes to the cores itself
		// and, event IDs coming from the data, serves the same stream, so
		// a client may reconnect to any of them and resume.
		opts = append(opts, service.SharedPort())
	}
	if cfg.TLSCert == "" {
		_, err := svc.Listen("edge http", cfg.HTTPAddr, h, opts...)
		return err
	}
	certs, err := svc.Certificate(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return err
	}
	if cfg.HSTS > 0 {
		h = strictTransport(h, cfg.HSTS)
	}
	addr, err := svc.Listen("edge https", cfg.HTTPAddr, h, append(opts, service.WithTLS(certfile.ServerConfig(certs)))...)
	if err != nil {
		return err
	}
	if cfg.PlainAddr == "" {
		return nil
	}
	plain := h
	if !cfg.PlainServe {
		plain = redirectToHTTPS(addr.(*net.TCPAddr).Port)
	}
	_, err = svc.Listen("edge http", cfg.PlainAddr, plain, opts...)
	return err
}

// strictTransport tells browsers to come back over HTTPS only, for maxAge.
func strictTransport(h http.Handler, maxAge time.Duration) http.Handler {
	value := "max-age=" + strconv.FormatInt(int64(maxAge/time.Second), 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", value)
		h.ServeHTTP(w, r)
	})
}

// redirectToHTTPS sends every request to the same host and path at the
// HTTPS port: 308, so that a POST stays a POST.
func redirectToHTTPS(port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		if host == "" {
			http.Error(w, "a Host header is needed to redirect to HTTPS", http.StatusBadRequest)
			return
		}
		if port != 443 {
			host = net.JoinHostPort(host, strconv.Itoa(port))
		} else if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
			host = "[" + host + "]"
		}
		http.Redirect(w, r, fmt.Sprintf("https://%s%s", host, r.URL.RequestURI()), http.StatusPermanentRedirect)
	})
}
