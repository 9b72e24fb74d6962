package chaoscmd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"shindo.dev/cli/internal/devcontrol"
	"shindo.dev/lib/certfile"

	"shindo.dev/sdk/trust"
)

// topology is a running `shindo dev` as its endpoints.json describes it,
// with the control API that takes its parts down and up.
type topology struct {
	dir     string
	control string
	ha      bool
	// doc is endpoints.json as read at attach: site → service → field.
	doc map[string]map[string]json.RawMessage

	adminToken, notifyToken string
	http                    *http.Client
	// tls trusts the dev CA of a shindo dev -tls (nil: the system's).
	tls *tls.Config
	// grpc is the transport to the services' gRPC: mutual TLS with the
	// operator's certificate under -tls, plain otherwise.
	grpc credentials.TransportCredentials
}

// attach reads dir/endpoints.json and the tokens shindo dev wrote.
func attach(dir string) (*topology, error) {
	t := &topology{dir: dir, http: &http.Client{Timeout: 10 * time.Second}, grpc: insecure.NewCredentials()}
	if err := t.reload(); err != nil {
		return nil, err
	}
	var dev struct {
		Control         string `json:"control"`
		HA              bool   `json:"ha"`
		AdminTokenFile  string `json:"admin_token_file"`
		NotifyTokenFile string `json:"notify_token_file"`
		CA              string `json:"ca"`
		OperatorCert    string `json:"operator_cert"`
		OperatorKey     string `json:"operator_key"`
	}
	raw, _ := json.Marshal(t.doc["dev"])
	if err := json.Unmarshal(raw, &dev); err != nil || dev.Control == "" {
		return nil, fmt.Errorf("%s names no control API: is it from this version of shindo dev?", filepath.Join(dir, "endpoints.json"))
	}
	t.control, t.ha = dev.Control, dev.HA
	if dev.CA != "" {
		cfg, err := trust.ClientConfig(dev.CA, "")
		if err != nil {
			return nil, fmt.Errorf("the dev CA: %w", err)
		}
		t.tls = cfg
		t.http = t.client(10*time.Second, 0)
	}
	if dev.OperatorCert != "" {
		cert, err := certfile.Load(dev.OperatorCert, dev.OperatorKey, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, fmt.Errorf("the operator's certificate: %w", err)
		}
		cas, err := certfile.LoadPool(dev.CA)
		if err != nil {
			return nil, fmt.Errorf("the dev CA: %w", err)
		}
		t.grpc = credentials.NewTLS(certfile.MutualClientConfig(cert, cas))
		if t.tls != nil {
			// The data APIs' REST under -tls serves operators' certificates.
			t.tls.GetClientCertificate = cert.GetClientCertificate
			t.http = t.client(10*time.Second, 0)
		}
	}
	for _, f := range []struct {
		path string
		into *string
	}{{dev.AdminTokenFile, &t.adminToken}, {dev.NotifyTokenFile, &t.notifyToken}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
		*f.into = strings.TrimSpace(string(b))
	}
	return t, nil
}

// client is an HTTP client of the topology's edges (trusting its CA under
// -tls) with a timeout for a whole request and one for a response's head
// (0: none).
func (t *topology) client(timeout, head time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig, tr.ResponseHeaderTimeout = t.tls, head
	return &http.Client{Timeout: timeout, Transport: tr}
}

// reload rereads endpoints.json, which shindo dev rewrites when a
// restarted process is ready.
func (t *topology) reload() error {
	path := filepath.Join(t.dir, "endpoints.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("no running shindo dev found (%v); start one with `make run`, or give its -dir", err)
	}
	var doc map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	t.doc = doc
	return nil
}

// field returns a string field of a service ("TNN-1", "dataapi", "http"),
// or "" when there is none.
func (t *topology) field(site, svc, key string) string {
	var m map[string]any
	if json.Unmarshal(t.doc[site][svc], &m) != nil {
		return ""
	}
	switch v := m[key].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	}
	return ""
}

var (
	coreSites = []string{"TNN-1", "TYO-1"}
	edgeSites = []string{"TPE-1", "KHH-1"}
)

func (t *topology) edges() []string {
	var out []string
	for _, s := range edgeSites {
		out = append(out, t.field(s, "edge", "http"))
	}
	return out
}

// databasePID is the dev database's postmaster (without -ha), 0 if none.
func (t *topology) databasePID() int {
	n, err := strconv.Atoi(t.field("TNN-1", "postgres", "pid"))
	if err != nil {
		return 0
	}
	return n
}

// proc is one process as the control API lists it.
type proc struct {
	Name  string `json:"name"`
	Site  string `json:"site"`
	Role  string `json:"role"`
	PID   int    `json:"pid"`
	State string `json:"state"`
}

func (t *topology) processes(ctx context.Context) ([]proc, error) {
	var doc struct {
		Processes []proc `json:"processes"`
	}
	if err := t.call(ctx, http.MethodGet, "/v1/processes", &doc); err != nil {
		return nil, err
	}
	sort.Slice(doc.Processes, func(i, j int) bool { return doc.Processes[i].Name < doc.Processes[j].Name })
	return doc.Processes, nil
}

// act asks the control API to stop or start a process, or to partition
// or heal the link between the cores.
func (t *topology) act(ctx context.Context, path string) error {
	return t.call(ctx, http.MethodPost, path, nil)
}

func (t *topology) call(ctx context.Context, method, path string, out any) error {
	client := t.http
	if method == http.MethodPost {
		// A start waits until the process is ready.
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	body, err := devcontrol.Call(ctx, client, method, t.control, path)
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// link is one impairable network path of the topology, as endpoints.json
// lists it under "links".
type link struct {
	Name string `json:"name"`
}

// links lists the impairable links shindo dev offers (none from a version
// without them).
func (t *topology) links(ctx context.Context) []string {
	var doc struct {
		Links []link `json:"links"`
	}
	if err := t.call(ctx, http.MethodGet, "/v1/links", &doc); err != nil {
		return nil
	}
	var out []string
	for _, l := range doc.Links {
		if l.Name != "intersite" {
			out = append(out, l.Name)
		}
	}
	return out
}

func linkPath(name, action, profile string) string {
	p := "/v1/links/" + url.PathEscape(name) + "/" + action
	if profile != "" {
		p += "?profile=" + url.QueryEscape(profile)
	}
	return p
}

// linkAddr is where a station sends through an impairable link ("udp" or
// "ws" of "uplink-TNN-1"), as endpoints.json lists it; "" without links.
func (t *topology) linkAddr(name, kind string) string { return t.field("links", name, kind) }
