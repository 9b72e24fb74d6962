package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"shindo.dev/devkit/pgserver"
)

// With -ha the metadata database is what SPEC §5 asks of production: a
// PostgreSQL member at each core managed by Patroni (synchronous mode,
// etcd across TNN-1, TYO-1 and TPE-1 as the quorum store), and HAProxy at
// each core leading that core's services to whichever member is primary.
// The settings are deploy/ha's; the dev stack only fills in its ports and
// directories.

// Patroni's timing: a dead leader's key expires after ttl; loop_wait +
// 2 × retry_timeout must not exceed ttl.
const (
	patroniTTL          = 10
	patroniLoopWait     = 2
	patroniRetryTimeout = 4
)

// haFiles are the -ha configuration files and data directories; they are
// made when the stack starts, under a directory the postgres user can
// enter.
type haFiles struct {
	base    string // directory of everything below
	members map[string]haMember
	haproxy map[string]string // per core: its HAProxy configuration file
	// checkCert, per core under -tls: the certificate and key (one file)
	// its HAProxy checks the members' REST APIs with.
	checkCert map[string]string
	etcdHosts []string // the quorum store, host:port
}

type haMember struct {
	config, dataDir string
	rest, postgres  string // listen addresses
	// etcdTLS: the files Patroni reaches etcd with under -tls, nil
	// without.
	etcdTLS *patroniTLS
}

// patroniTLS are a member's certificate and the CA for etcd, in files its
// user can read.
type patroniTLS struct{ ca, cert, key string }

// haProcesses adds each core's Patroni and HAProxy to the plan.
func (p *plan) haProcesses(addr func(site, int) string) (patronis, haproxies []*process) {
	p.ha = &haFiles{members: map[string]haMember{}, haproxy: map[string]string{}, checkCert: map[string]string{}}
	for _, s := range []site{tnn, tyo, tpe} {
		p.ha.etcdHosts = append(p.ha.etcdHosts, addr(s, etcdClient))
	}
	cfg := p.cfg
	for _, c := range cores {
		m := haMember{rest: addr(c, patroniREST), postgres: addr(c, postgresPort)}
		p.ha.members[c.name] = m
		if c != tnn { // TNN-1's member port is in the plan already
			p.addPort(c.name+" PostgreSQL", cfg.PortBase+c.block+postgresPort, false)
		}
		p.addPort(c.name+" Patroni REST", cfg.PortBase+c.block+patroniREST, false)
		p.addPort(c.name+" HAProxy (primary)", cfg.PortBase+c.block+haproxyPort, false)
		p.addPort(c.name+" HAProxy health", cfg.PortBase+c.block+haproxyHealth, false)
		// Under -tls Patroni's REST API is mutual TLS like every internal
		// hop: HAProxy's checks, the other member and the tools present a
		// certificate of the dev CA.
		rest := p.webScheme() + "://" + m.rest
		patronis = append(patronis, &process{
			name: c.name + "-patroni", site: c.name, role: "patroni", bin: "patroni",
			readyURL:  rest + "/health",
			listeners: map[string]string{"rest": rest, "postgres": m.postgres},
		})
		haproxies = append(haproxies, &process{
			name: c.name + "-haproxy", site: c.name, role: "haproxy", bin: "haproxy",
			readyURL:  "http://" + addr(c, haproxyHealth) + "/health",
			listeners: map[string]string{"primary": addr(c, haproxyPort)},
		})
	}
	return patronis, haproxies
}

// checkHA finds Patroni, HAProxy and the PostgreSQL binaries.
func checkHA() error {
	var missing []string
	for _, b := range []string{"patroni", "haproxy"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("-ha needs %s: apt-get install %s (Debian's packages)", strings.Join(missing, " and "), strings.Join(missing, " "))
	}
	_, err := pgserver.BinDir(15)
	return err
}

// writeHA makes the -ha data directories and configuration files under
// base (fresh at every start, like the rest of the dev data) and points
// the Patroni and HAProxy processes at them.
func (p *plan) writeHA(base string) error {
	as, err := pgserver.RunAs()
	if err != nil {
		return err
	}
	bin, err := pgserver.BinDir(15)
	if err != nil {
		return err
	}
	// A member left running by an earlier run that was killed outright.
	for _, c := range cores {
		killPostmaster(filepath.Join(base, c.name, "data"))
	}
	if err := os.RemoveAll(base); err != nil {
		return err
	}
	if err := mkdirAs(base, as); err != nil {
		return err
	}
	p.ha.base = base
	for _, pr := range p.processes() {
		switch pr.role {
		case "patroni":
			m := p.ha.members[pr.site]
			m.dataDir = filepath.Join(base, pr.site, "data")
			m.config = filepath.Join(base, pr.site+"-patroni.yml")
			if err := mkdirAs(filepath.Dir(m.dataDir), as); err != nil {
				return err
			}
			if p.cfg.TLS {
				// etcd wants a certificate of the network; Patroni runs as
				// the database's user, who cannot read the dev CA's
				// directory, so its files go into its own.
				home := filepath.Dir(m.dataDir)
				m.etcdTLS = &patroniTLS{ca: filepath.Join(home, "ca.pem"), cert: filepath.Join(home, "patroni.pem"), key: filepath.Join(home, "patroni-key.pem")}
				p.certs = append(p.certs, certPlan{site: pr.site, role: "patroni", hosts: []string{p.host(pr.site), "localhost"},
					certFile: m.etcdTLS.cert, keyFile: m.etcdTLS.key, caCopy: m.etcdTLS.ca, owner: as})
			}
			doc := patroniConfig(pr.site, m, p.ha.etcdHosts, bin, filepath.Dir(m.dataDir), p.trustedNets())
			if err := os.WriteFile(m.config, []byte(doc), 0o644); err != nil {
				return err
			}
			p.ha.members[pr.site] = m
			pr.args, pr.as = []string{m.config}, as
		case "haproxy":
			if p.cfg.TLS {
				// HAProxy's health checks of the members' REST APIs present
				// its own certificate, which it reads with the key in one
				// file.
				p.ha.checkCert[pr.site] = filepath.Join(base, pr.site+"-haproxy-check.pem")
				p.certs = append(p.certs, certPlan{site: pr.site, role: "haproxy", hosts: []string{p.host(pr.site), "localhost"},
					certFile: filepath.Join(base, pr.site+"-haproxy.pem"), keyFile: filepath.Join(base, pr.site+"-haproxy-key.pem"),
					combined: p.ha.checkCert[pr.site]})
			}
			path := filepath.Join(base, pr.site+"-haproxy.cfg")
			if err := os.WriteFile(path, []byte(p.haproxyConfig(pr.site)), 0o644); err != nil {
				return err
			}
			p.ha.haproxy[pr.site] = path
			pr.args = []string{"-db", "-f", path}
		}
	}
	return nil
}

// mkdirAs makes dir for the user as: its missing parents open to pass
// through, dir itself the user's alone.
func mkdirAs(dir string, as *syscall.Credential) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	if as != nil {
		return os.Chown(dir, int(as.Uid), int(as.Gid))
	}
	return nil
}

// trustedNets are the networks the members trust: loopback, and with -wan
// the sites' /16 (the members, the HAProxies and shindo dev itself reach
// them from there).
func (p *plan) trustedNets() []string {
	nets := []string{"127.0.0.1/32"}
	for _, h := range p.hosts {
		if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
			if pfx, err := a.Prefix(16); err == nil && !slices.Contains(nets, pfx.String()) {
				nets = append(nets, pfx.String())
			}
		}
	}
	slices.Sort(nets[1:])
	return nets
}

// patroniConfig is a member's Patroni configuration: deploy/ha's settings
// with this stack's addresses. Trust authentication on the trusted
// networks only.
func patroniConfig(name string, m haMember, etcdHosts []string, binDir, home string, trusted []string) string {
	var hba strings.Builder
	for _, n := range trusted {
		fmt.Fprintf(&hba, "    - host replication postgres %s trust\n    - host all all %s trust\n", n, n)
	}
	etcd, pgAuth, pgParams, superuser, replication, restTLS := "", "", "", "", "", ""
	if t := m.etcdTLS; t != nil {
		// The REST API serves certificates of the dev CA only; Patroni
		// calls the other member's with the same certificate.
		restTLS = fmt.Sprintf("  certfile: %s\n  keyfile: %s\n  cafile: %s\n  verify_client: required\n", t.cert, t.key, t.ca)
		// Under -tls: etcd over TLS, and PostgreSQL takes TCP connections
		// — the services', Patroni's own, the standby's replication —
		// only over TLS with a certificate of the dev CA.
		etcd = fmt.Sprintf("  protocol: https\n  cacert: %s\n  cert: %s\n  key: %s\n", t.ca, t.cert, t.key)
		hba.Reset()
		hba.WriteString("    - hostssl replication postgres all cert map=shindo\n    - hostssl all all all cert map=shindo\n    - hostnossl all all all reject\n")
		pgAuth = fmt.Sprintf("  pg_ident:\n    - shindo /^.*$ postgres\n  pg_hba:\n    - local all all trust\n%s", hba.String())
		pgParams = fmt.Sprintf("    ssl: \"on\"\n    ssl_cert_file: %s\n    ssl_key_file: %s\n    ssl_ca_file: %s\n    ssl_min_protocol_version: TLSv1.3\n", t.cert, t.key, t.ca)
		client := fmt.Sprintf("      sslmode: verify-full\n      sslrootcert: %s\n      sslcert: %s\n      sslkey: %s\n", t.ca, t.cert, t.key)
		superuser, replication = client, client
	}
	return fmt.Sprintf(`scope: shindo
namespace: /shindo-dev/
name: %[1]s
log:
  level: INFO
restapi:
  listen: %[2]s
  connect_address: %[2]s
%[17]setcd3:
  hosts: %[3]s
%[12]sbootstrap:
  dcs:
    ttl: %[4]d
    loop_wait: %[5]d
    retry_timeout: %[6]d
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_log_hints: "on"
        synchronous_commit: "on"
  initdb:
    - encoding: UTF8
    - locale: C
    - data-checksums
  pg_hba:
    - local all all trust
%[11]spostgresql:
  listen: %[7]s
  connect_address: %[7]s
  data_dir: %[8]s
  bin_dir: %[9]s
  pgpass: %[10]s/pgpass
%[16]s  authentication:
    superuser:
      username: postgres
%[14]s    replication:
      username: postgres
%[15]s  parameters:
    unix_socket_directories: %[10]s
    fsync: "on"
%[13]s
tags:
  nofailover: false
  noloadbalance: false
`, name, m.rest, strings.Join(etcdHosts, ","), patroniTTL, patroniLoopWait, patroniRetryTimeout,
		m.postgres, m.dataDir, binDir, home, hba.String(), etcd, pgParams, superuser, replication, pgAuth, restTLS)
}

// haproxyConfig is a core's HAProxy: one TCP listener leading to the member
// whose Patroni says it is the primary, and a health endpoint.
func (p *plan) haproxyConfig(name string) string {
	var servers strings.Builder
	for _, c := range cores {
		m := p.ha.members[c.name]
		_, restPort, _ := net.SplitHostPort(m.rest)
		check := ""
		if cert := p.ha.checkCert[name]; cert != "" {
			// The REST API over mutual TLS; the chain is checked against
			// the dev CA, which issues no certificate outside the network.
			check = fmt.Sprintf(" check-ssl verify required ca-file %s crt %s", p.caFile, cert)
		}
		fmt.Fprintf(&servers, "  server %s %s check port %s%s\n", c.name, m.postgres, restPort, check)
	}
	var self site
	for _, c := range cores {
		if c.name == name {
			self = c
		}
	}
	listen := hostPort(p.host(name), p.cfg.PortBase+self.block+haproxyPort)
	health := hostPort(p.host(name), p.cfg.PortBase+self.block+haproxyHealth)
	return fmt.Sprintf(`global
  maxconn 500

defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s

# The primary, as the members' Patroni REST APIs say (GET /primary is 200
# on the leader only); sessions to a member that stops being it are cut.
listen primary
  bind %s
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
%s
frontend health
  mode http
  bind %s
  monitor-uri /health
`, listen, servers.String(), health)
}

// makeDatabase waits until the replicated database has a primary with a
// synchronous standby, reached through TNN-1's HAProxy, and makes the dev
// database afresh there.
func (p *plan) makeDatabase(ctx context.Context, log *slog.Logger) (string, error) {
	admin := fmt.Sprintf("postgres://postgres@%s/postgres?connect_timeout=2&%s", hostPort(p.host(tnn.name), p.cfg.PortBase+tnn.block+haproxyPort),
		dbTLSQuery(p.cfg, p.operatorCert, p.operatorKey))
	deadline := time.Now().Add(p.cfg.ReadyTimeout)
	var last error
	for {
		if last = remakeOnPrimary(ctx, admin); last == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("replicated metadata database: no primary with a synchronous standby within %s: %w (see the Patroni logs)", p.cfg.ReadyTimeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
	log.Info("replicated metadata database up", slog.String("via", "HAProxy at each core"))
	return strings.Replace(admin, "/postgres?", "/"+dbName+"?", 1), nil
}

// remakeOnPrimary connects to admin and, if it reached a primary that has
// a synchronous standby, drops and creates the dev database on that same
// connection. A new connection could land elsewhere: while the cluster
// settles its leader can change, and HAProxy takes two failed checks to
// stop sending sessions to a member that no longer leads (a standby then
// refuses the DDL as a read-only transaction).
func remakeOnPrimary(ctx context.Context, admin string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var standby bool
	var sync int
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), (SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync')`).Scan(&standby, &sync); err != nil {
		return err
	}
	if standby {
		return errors.New("reached a standby")
	}
	if sync == 0 {
		return errors.New("no synchronous standby yet")
	}
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbName + " WITH (FORCE)", "CREATE DATABASE " + dbName} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// killPostmaster SIGKILLs the PostgreSQL server running in dataDir, if its
// postmaster.pid names a live postgres process; its backends end with it.
func killPostmaster(dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 1 {
		return
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		return // stale: that process is gone, or is something else now
	}
	_ = syscall.Kill(pid, syscall.SIGKILL) // gone already is as good: the loop below waits for that
	for range 50 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
