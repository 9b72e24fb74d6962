package devstack

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestHAMatchesDeploy: shindo dev --ha runs deploy/ha's settings — the
// same Patroni cluster settings (dcs, initdb) and the same HAProxy health
// checking — with only addresses, directories and authentication its own.
func TestHAMatchesDeploy(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.HA, cfg.TLS = true, true
	p := newPlan(cfg)
	for _, c := range cores {
		m := p.ha.members[c.name]
		m.dataDir = "/tmp/x/" + c.name + "/data"
		m.etcdTLS = &patroniTLS{ca: "/tmp/x/ca.pem", cert: "/tmp/x/patroni.pem", key: "/tmp/x/patroni-key.pem"}
		dev := patroniConfig(c.name, m, p.ha.etcdHosts, "/usr/lib/postgresql/15/bin", "/tmp/x/"+c.name, p.trustedNets())
		deployed, err := os.ReadFile("../../../deploy/ha/patroni-" + c.name + ".yml")
		if err != nil {
			t.Fatal(err)
		}
		var a, b map[string]any
		if err := yaml.Unmarshal([]byte(dev), &a); err != nil {
			t.Fatalf("dev config: %v\n%s", err, dev)
		}
		if err := yaml.Unmarshal(deployed, &b); err != nil {
			t.Fatalf("deploy config: %v", err)
		}
		ab, bb := a["bootstrap"].(map[string]any), b["bootstrap"].(map[string]any)
		for _, key := range []string{"dcs", "initdb"} {
			if !reflect.DeepEqual(ab[key], bb[key]) {
				t.Errorf("%s: bootstrap.%s differs:\ndev    %v\ndeploy %v", c.name, key, ab[key], bb[key])
			}
		}
		if a["name"] != c.name || a["scope"] != b["scope"] {
			t.Errorf("%s: name %v scope %v", c.name, a["name"], a["scope"])
		}
		checkSameTLS(t, c.name, a, b)
	}
	deployed, err := os.ReadFile("../../../deploy/ha/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	dev := p.haproxyConfig(tnn.name)
	for _, line := range []string{"option httpchk GET /primary", "http-check expect status 200",
		"default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions", "monitor-uri /health"} {
		if !strings.Contains(dev, line) || !strings.Contains(string(deployed), line) {
			t.Errorf("%q not in both HAProxy configurations", line)
		}
	}
	if strings.Count(dev, "\n  server ") != len(cores) {
		t.Errorf("dev HAProxy does not list every member:\n%s", dev)
	}
	p.ha.checkCert[tnn.name] = "/tmp/x/haproxy-check.pem"
	dev = p.haproxyConfig(tnn.name)
	for name, doc := range map[string]string{"dev": dev, "deploy": string(deployed)} {
		if n := strings.Count(doc, " check-ssl verify required ca-file "); n != len(cores) {
			t.Errorf("%s HAProxy checks %d members over mutual TLS, want %d", name, n, len(cores))
		}
	}
}

// checkSameTLS: the deployed member is as encrypted as shindo dev -tls -ha's
// (a, the dev configuration; b, the deployed one): the REST API requires a
// client certificate, etcd is https with certificates, PostgreSQL has TLS
// 1.3 on, refuses TCP without it, and Patroni's own connections verify the
// server and present a certificate. Paths and the networks differ.
func checkSameTLS(t *testing.T, site string, a, b map[string]any) {
	t.Helper()
	get := func(doc map[string]any, path ...string) any {
		var cur any = doc
		for _, k := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		}
		return cur
	}
	for _, path := range [][]string{
		{"restapi", "verify_client"}, {"etcd3", "protocol"},
		{"postgresql", "parameters", "ssl"}, {"postgresql", "parameters", "ssl_min_protocol_version"},
		{"postgresql", "authentication", "superuser", "sslmode"}, {"postgresql", "authentication", "replication", "sslmode"},
	} {
		if va, vb := get(a, path...), get(b, path...); va == nil || !reflect.DeepEqual(va, vb) {
			t.Errorf("%s: %s is %v in dev, %v deployed", site, strings.Join(path, "."), va, vb)
		}
	}
	for _, path := range [][]string{
		{"restapi", "certfile"}, {"restapi", "keyfile"}, {"restapi", "cafile"},
		{"etcd3", "cacert"}, {"etcd3", "cert"}, {"etcd3", "key"},
		{"postgresql", "parameters", "ssl_cert_file"}, {"postgresql", "parameters", "ssl_key_file"}, {"postgresql", "parameters", "ssl_ca_file"},
		{"postgresql", "authentication", "superuser", "sslcert"}, {"postgresql", "authentication", "replication", "sslcert"},
		{"postgresql", "authentication", "superuser", "sslrootcert"}, {"postgresql", "authentication", "replication", "sslrootcert"},
	} {
		for name, doc := range map[string]map[string]any{"dev": a, "deployed": b} {
			if v, _ := get(doc, path...).(string); v == "" {
				t.Errorf("%s: %s has no %s", site, name, strings.Join(path, "."))
			}
		}
	}
	for name, doc := range map[string]map[string]any{"dev": a, "deployed": b} {
		hba, _ := get(doc, "postgresql", "pg_hba").([]any)
		if !slices.Contains(hba, any("hostnossl all all all reject")) {
			t.Errorf("%s: %s pg_hba does not refuse TCP without TLS: %v", site, name, hba)
		}
		for _, rule := range hba {
			if r, _ := rule.(string); strings.HasPrefix(r, "host ") {
				t.Errorf("%s: %s pg_hba admits TCP with or without TLS: %q", site, name, r)
			}
		}
	}
}

// TestHAPlan: with -ha every core's services reach the database through
// their own core's HAProxy, and the members start after the quorum store.
func TestHAPlan(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.HA = true
	p := newPlan(cfg)
	if roles := func(g []*process) string {
		var r []string
		for _, pr := range g {
			r = append(r, pr.role)
		}
		return strings.Join(r, ",")
	}; roles(p.groups[0]) != "etcd,etcd,etcd" || roles(p.groups[1]) != "patroni,patroni" || roles(p.groups[2]) != "haproxy,haproxy" {
		t.Fatalf("groups %s | %s | %s", roles(p.groups[0]), roles(p.groups[1]), roles(p.groups[2]))
	}
	for _, pr := range p.processes() {
		for i, a := range pr.args {
			if a != "-database-url" {
				continue
			}
			block := map[string]int{"TNN-1": 0, "TYO-1": 100}[pr.site]
			want := hostPort("127.0.0.1", cfg.PortBase+block+haproxyPort)
			if !strings.Contains(pr.args[i+1], want) {
				t.Errorf("%s: -database-url %s, want its core's HAProxy %s", pr.name, pr.args[i+1], want)
			}
		}
	}
}

// TestHAConfigUnderTLS: with -tls a member's Patroni reaches etcd over
// TLS, and its PostgreSQL takes TCP connections — Patroni's own, the
// standby's replication, the services' — only over TLS with a certificate
// of the dev CA, mapped to the superuser; its REST API serves certificates
// of the CA only, and HAProxy checks it with one.
func TestHAConfigUnderTLS(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.HA, cfg.TLS = true, true
	p := newPlan(cfg)
	m := p.ha.members[tnn.name]
	m.dataDir = "/tmp/x/TNN-1/data"
	m.etcdTLS = &patroniTLS{ca: "/tmp/x/TNN-1/ca.pem", cert: "/tmp/x/TNN-1/patroni.pem", key: "/tmp/x/TNN-1/patroni-key.pem"}
	doc := patroniConfig(tnn.name, m, p.ha.etcdHosts, "/usr/lib/postgresql/15/bin", "/tmp/x/TNN-1", p.trustedNets())
	var c struct {
		Restapi struct {
			Certfile, Keyfile, Cafile string
			VerifyClient              string `yaml:"verify_client"`
		}
		Etcd3 struct {
			Protocol, Cacert, Cert, Key string
		}
		Postgresql struct {
			PgHba          []string          `yaml:"pg_hba"`
			PgIdent        []string          `yaml:"pg_ident"`
			Parameters     map[string]string `yaml:"parameters"`
			Authentication map[string]map[string]string
		}
	}
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if c.Etcd3.Protocol != "https" || c.Etcd3.Cert != m.etcdTLS.cert || c.Etcd3.Cacert != m.etcdTLS.ca {
		t.Errorf("etcd3: %+v", c.Etcd3)
	}
	pg := c.Postgresql
	if pg.Parameters["ssl"] != "on" || pg.Parameters["ssl_cert_file"] != m.etcdTLS.cert || pg.Parameters["unix_socket_directories"] == "" {
		t.Errorf("parameters: %v", pg.Parameters)
	}
	if !slices.Contains(pg.PgHba, "hostnossl all all all reject") || !slices.Contains(pg.PgHba, "hostssl replication postgres all cert map=shindo") {
		t.Errorf("pg_hba: %v", pg.PgHba)
	}
	for _, who := range []string{"superuser", "replication"} {
		if a := pg.Authentication[who]; a["sslmode"] != "verify-full" || a["sslcert"] != m.etcdTLS.cert || a["sslrootcert"] != m.etcdTLS.ca {
			t.Errorf("%s: %v", who, a)
		}
	}
	if len(pg.PgIdent) != 1 {
		t.Errorf("pg_ident: %v", pg.PgIdent)
	}
	if r := c.Restapi; r.Certfile != m.etcdTLS.cert || r.Keyfile != m.etcdTLS.key || r.Cafile != m.etcdTLS.ca || r.VerifyClient != "required" {
		t.Errorf("restapi: %+v", r)
	}
	p.ha.checkCert[tnn.name] = "/tmp/x/TNN-1-haproxy-check.pem"
	if hc := p.haproxyConfig(tnn.name); strings.Count(hc, "check-ssl verify required ca-file "+p.caFile+" crt /tmp/x/TNN-1-haproxy-check.pem") != 2 {
		t.Errorf("HAProxy does not check both members over TLS:\n%s", hc)
	}
	for _, pr := range p.processes() {
		if pr.role == "patroni" && (!strings.HasPrefix(pr.listeners["rest"], "https://") || !strings.HasPrefix(pr.readyURL, "https://")) {
			t.Errorf("%s's REST API at %s, readiness %s under -tls", pr.name, pr.listeners["rest"], pr.readyURL)
		}
	}
}
