// Package cidr reads lists of trusted networks (the edges a core's
// listeners accept as proxies) and tells whether an address is in one.
package cidr

import (
	"fmt"
	"net/netip"
	"strings"
)

// Parse reads CIDRs or single addresses (a /32 or /128 each); blank
// entries are skipped.
func Parse(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q: want CIDRs or addresses", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Contains tells whether a is in one of ps; an IPv4 address written as
// IPv6 (::ffff:a.b.c.d, as a dual-stack listener reports it) counts as
// the IPv4 one.
func Contains(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
