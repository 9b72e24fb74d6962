// Package pki issues the certificates of a shindo network from a CA (for
// shindo dev -tls, shindo cert and tests; it writes no file): each
// names the site and the role of what holds it (a URI SAN
// shindo://SITE/ROLE), so that a server can tell not only that a caller
// belongs to the network but what it may ask for. lib/peerid reads it
// back (its tests issue here, so the two cannot drift apart).
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Identity is who holds a certificate: a site (TNN-1) and a role (ingest,
// edge, station, …).
type Identity struct {
	Site, Role string
}

// scheme is the URI SAN's scheme that carries an Identity.
const scheme = "shindo"

var namePart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks that both parts are present and are plain names.
func (id Identity) Validate() error {
	if !namePart.MatchString(id.Site) || !namePart.MatchString(id.Role) {
		return fmt.Errorf("identity %q/%q: site and role must be 1 to 64 letters, digits, '.', '_' or '-'", id.Site, id.Role)
	}
	return nil
}

// URI is the identity as the certificate carries it.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: scheme, Host: id.Site, Path: "/" + id.Role}
}

func (id Identity) String() string { return id.Site + "/" + id.Role }

// KeyType is the kind of key a certificate is issued for.
type KeyType string

const (
	ECDSAP256 KeyType = "ecdsa-p256"
	RSA2048   KeyType = "rsa-2048"
)

func (k KeyType) generate() (crypto.Signer, error) {
	switch k {
	case ECDSAP256, "":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, fmt.Errorf("key type %q: want %s or %s", k, ECDSAP256, RSA2048)
	}
}

// CA is a certificate authority: the certificate every party trusts and
// the key that signs the others.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// PEM is Cert encoded, the trust bundle handed to every party.
	PEM []byte
}

// NewCA makes a CA named name, valid for validity from now (less a few
// minutes, for clocks a little behind).
func NewCA(name string, validity time.Duration) (*CA, error) {
	key, err := ECDSAP256.generate()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"shindo"}},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadCA reads a CA an operator provides: its certificate and its key in
// PEM (PKCS #8, PKCS #1 or SEC 1).
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s: not a CA certificate (basic constraints CA and key usage certSign)", certFile)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%s is not the key of %s", keyFile, certFile)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(block)}, nil
}

// KeyPEM is the CA's key in PEM (PKCS #8), for a later LoadCA.
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// ParseKey reads a private key in PEM: PKCS #8, PKCS #1 (RSA) or SEC 1 (EC).
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", block.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return s, nil
}

// Request is what a certificate is issued for.
type Request struct {
	Identity
	// Hosts are the DNS names and IP addresses the holder serves at; a
	// certificate only for calling may have none.
	Hosts    []string
	Validity time.Duration
	Key      KeyType
	// OCSPServer are the responders that answer for the certificate.
	OCSPServer []string
}

// Issued is a certificate and its key, both PEM.
type Issued struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
}

// Issue signs a certificate for req: usable to serve and to call (a
// service is both), naming req's identity, valid from now for
// req.Validity but never beyond the CA.
func (ca *CA) Issue(req Request) (*Issued, error) {
	if err := req.Identity.Validate(); err != nil {
		return nil, err
	}
	if req.Validity <= 0 {
		return nil, errors.New("validity must be positive")
	}
	key, err := req.Key.generate()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(req.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.Site + " " + req.Role, Organization: []string{"shindo"}, OrganizationalUnit: []string{req.Role}},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{req.URI()},
		OCSPServer:   req.OCSPServer,
	}
	if _, ok := key.(*rsa.PrivateKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	for _, h := range req.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert:    cert,
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// IssueFiles issues a certificate of site and role for hosts, valid an
// hour, and writes it and its key into dir as SITE-ROLE.pem and
// SITE-ROLE-key.pem (the key readable by its owner alone); with the CA's
// own certificate at dir/ca.pem. For tests that run servers and clients
// from files.
func (ca *CA) IssueFiles(dir, site, role string, hosts ...string) (certFile, keyFile string, err error) {
	is, err := ca.Issue(Request{Identity: Identity{Site: site, Role: role}, Hosts: hosts, Validity: time.Hour})
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, site+"-"+role+".pem"), filepath.Join(dir, site+"-"+role+"-key.pem")
	if err := replace(keyFile, is.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := replace(certFile, is.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, replace(filepath.Join(dir, "ca.pem"), ca.PEM, 0o644)
}

// replace writes name whole through a rename: every call rewrites ca.pem,
// and a server that is reading it meanwhile (starting, or reloading on a
// change) must see the old bundle or the new, never an empty file.
func replace(name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone after the rename; left only on error
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
