package writev

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"shindo.dev/devkit/tlsrecord"
)

// writes counts the Write calls made on a connection.
type writes struct {
	net.Conn
	calls [][]byte
}

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, append([]byte(nil), p...))
	return len(p), nil
}

// TestOneWriteOffASocket: a connection that is not a bare socket gets the
// buffers in one Write, in order.
func TestOneWriteOffASocket(t *testing.T) {
	w := &writes{}
	if err := Write(w, []byte("5\r\n"), []byte("hello"), []byte("\r\n")); err != nil {
		t.Fatal(err)
	}
	if len(w.calls) != 1 || string(w.calls[0]) != "5\r\nhello\r\n" {
		t.Fatalf("writes %q, want one of %q", w.calls, "5\r\nhello\r\n")
	}
}

// TestSocketGetsEverything: on a bare TCP socket (writev) every byte
// arrives, in order, however many buffers.
func TestSocketGetsEverything(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var bufs [][]byte
	var want []byte
	for i := range 2000 { // beyond IOV_MAX (1024)
		b := bytes.Repeat([]byte{byte(i)}, i%7+1)
		bufs, want = append(bufs, b), append(want, b...)
	}
	if err := Write(c, bufs...); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("received %d bytes, want the %d written", len(b), len(want))
	}
}

// TestTLSOneRecord: over TLS a message of three parts is one record.
func TestTLSOneRecord(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"x"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	// No session tickets: they would be records of their own after the handshake.
	server := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, SessionTicketsDisabled: true})
	raw := &tlsrecord.Counter{Conn: b}
	client := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a throwaway certificate; the records are what is tested
	go func() {
		if server.Handshake() == nil {
			// Small enough for the first record of crypto/tls's dynamic
			// record sizing (about 1.2 kB).
			Write(server, []byte("1f4\r\n"), bytes.Repeat([]byte("x"), 500), []byte("\r\n"))
		}
	}()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	before := raw.Records()
	buf := make([]byte, 507)
	if _, err := io.ReadFull(client, buf); err != nil {
		t.Fatal(err)
	}
	if n := raw.Records() - before; n != 1 {
		t.Fatalf("the message came in %d TLS records, want 1", n)
	}
}
