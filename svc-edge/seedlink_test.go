package edge

import (
	"strings"
	"testing"
)

// TestSeedLinkConfig: SeedLink routing needs one core address per data API
// core, in the same order, each host:port; SeedLink over TLS needs the
// edge's certificate.
func TestSeedLinkConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		seedlink []string
		tls      string
		want     string
	}{
		{[]string{"127.0.0.1:17022", "127.0.0.1:17122"}, "", ""},
		{[]string{"127.0.0.1:17022"}, "", "one address per -data-api core"},
		{[]string{"127.0.0.1:17022", "nowhere"}, "", `seedlink "nowhere": want host:port`},
		{[]string{"127.0.0.1:17022", "127.0.0.1:17122"}, "127.0.0.1:17205", "seedlink-tls-addr needs tls-cert"},
	} {
		cfg := DefaultConfig()
		cfg.Site, cfg.RTS = "TPE-1", []string{"127.0.0.1:17010"}
		cfg.DataAPI = []string{"http://127.0.0.1:17030", "http://127.0.0.1:17130"}
		cfg.SeedLinkAddr, cfg.SeedLink, cfg.SeedLinkClients = "127.0.0.1:17204", tt.seedlink, 10
		cfg.SeedLinkTLSAddr = tt.tls
		err := cfg.Validate()
		if tt.want == "" && err != nil && strings.Contains(err.Error(), "seedlink") || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: %v, want %q", tt.seedlink, err, tt.want)
		}
	}
}
