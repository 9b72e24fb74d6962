// Package trust decides which servers a station (or any client of the
// network) trusts: those whose certificate chains to a CA it was given, or
// whose public key matches a SHA-256 pin it was given, or both. A station
// cannot ask anyone when a certificate looks wrong, so what it trusts is
// configured, not taken from the system.
package trust

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// pinPrefix is how pins are written: sha256// and the base64 of the hash
// of the certificate's SubjectPublicKeyInfo, as curl's --pinnedpubkey
// writes them. A key pinned survives its certificate being renewed.
const pinPrefix = "sha256//"

// Pin is the pin of cert's public key.
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return pinPrefix + base64.StdEncoding.EncodeToString(sum[:])
}

// ParsePins reads pins separated by commas or semicolons (several: the
// keys before and after a rotation).
func ParsePins(s string) ([][sha256.Size]byte, error) {
	var pins [][sha256.Size]byte
	for p := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ';' }) {
		b64, ok := strings.CutPrefix(strings.TrimSpace(p), pinPrefix)
		if !ok {
			return nil, fmt.Errorf("pin %q: want %s followed by base64", p, pinPrefix)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("pin %q: not the base64 of a SHA-256 hash", p)
		}
		pins = append(pins, [sha256.Size]byte(raw))
	}
	return pins, nil
}

// ErrPinMismatch is a server whose key matches no pin.
var ErrPinMismatch = errors.New("the server's public key matches no configured pin")

// ClientConfig is the TLS configuration of a client trusting the CAs in
// caFile (PEM) and, if pins is not empty, requiring the server's key to
// match one of them. With pins and no CA file the pin alone is the trust:
// the chain is not checked, the key is. With neither, the system's CAs.
func ClientConfig(caFile, pins string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if pins == "" {
		return cfg, nil
	}
	want, err := ParsePins(pins)
	if err != nil {
		return nil, err
	}
	if len(want) == 0 {
		return nil, errors.New("no pin in the pin list")
	}
	// The chain is checked by crypto/tls when there is a CA; the key
	// always here, after it.
	cfg.InsecureSkipVerify = caFile == ""
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return ErrPinMismatch
		}
		got := sha256.Sum256(cs.PeerCertificates[0].RawSubjectPublicKeyInfo)
		for _, w := range want {
			if subtle.ConstantTimeCompare(got[:], w[:]) == 1 {
				return nil
			}
		}
		return ErrPinMismatch
	}
	return cfg, nil
}
