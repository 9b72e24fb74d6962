package devstack

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"shindo.dev/cli/internal/netprofile"
	"shindo.dev/cli/internal/wan"
)

// With -wan the topology runs on network namespaces (cli/internal/wan):
// TNN-1, TYO-1, TPE-1, KHH-1 and the stations each in one of their own,
// every process in its site's, binding the site's address, so each
// connection between sites crosses the link netprofile gives that pair.
// shindo dev itself, the control API and the dev metadata database stay in
// the root namespace, which reaches every site unimpaired, as the internet
// does; the database is TNN-1's, so it is also served at TNN-1's address
// (relayDatabase) and the other sites reach it across their link to TNN-1.

// buildWAN makes the namespaces and returns them with each site's address.
func buildWAN(log *slog.Logger) (*wan.Net, map[string]string, error) {
	n, err := wan.Build(wanSites, log)
	if err != nil {
		return nil, nil, fmt.Errorf("-wan: %w", err)
	}
	hosts := map[string]string{}
	for _, s := range n.Sites() {
		hosts[s.Name] = s.Addr.String()
	}
	return n, hosts, nil
}

// linksProfile is the profile every link starts under: -links, or by
// default clear on loopback and wan on namespaces.
func (c *Config) linksProfile() string {
	switch {
	case c.Links != "":
		return c.Links
	case c.WAN:
		return netprofile.WAN
	}
	return netprofile.Clear
}

// relayDatabase serves the metadata database, which listens on loopback in
// the root namespace (its authentication admits loopback only), at TNN-1's
// address in TNN-1's namespace: each connection accepted there is joined
// to one made to target. It returns a function that closes the listener
// and every connection.
func relayDatabase(n *wan.Net, listen, target string, log *slog.Logger) (stop func(), err error) {
	ln, err := n.Listen(tnn.name, "tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("metadata database at %s: %w", listen, err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					log.Error("metadata database relay stopped", slog.Any("error", err))
				}
				return
			}
			go func() {
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					c.Close()
					return
				}
				track(c, true)
				track(up, true)
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					io.Copy(dst, src)
					if tc, ok := dst.(*net.TCPConn); ok {
						tc.CloseWrite()
					}
					done <- struct{}{}
				}
				go pipe(up, c)
				go pipe(c, up)
				<-done
				<-done
				c.Close()
				up.Close()
				track(c, false)
				track(up, false)
			}()
		}
	}()
	return func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	}, nil
}

// wanDoc is the "wan" section of endpoints.json's "dev": the sites'
// namespaces and addresses, and the root namespace's interface.
func wanDoc(n *wan.Net) map[string]any {
	sites := map[string]any{}
	for _, s := range n.Sites() {
		sites[s.Name] = map[string]string{"netns": s.Netns, "address": s.Addr.String()}
	}
	return map[string]any{"prefix": n.Prefix.String(), "root_interface": n.Root, "root_address": n.RootAddr.String(), "sites": sites}
}
