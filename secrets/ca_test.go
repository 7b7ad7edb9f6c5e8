package secrets

// Unit tier.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// handshake runs a TLS handshake over a pipe between a server showing
// server's leaf for host and a client that trusts roots and asks for name.
func handshake(t *testing.T, server *CA, host string, roots *CA, name string) error {
	t.Helper()
	leaf, err := server.Leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(roots.Certificate())
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		srv := tls.Server(queue(s), &tls.Config{Certificates: []tls.Certificate{*leaf}, MinVersion: tls.VersionTLS12})
		done <- srv.Handshake()
		srv.Close()
	}()
	cli := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12})
	err = cli.Handshake()
	c.Close() // ends the server's writes the client no longer reads
	<-done
	return err
}

// queued is a conn whose writes never wait for the peer to read: a pipe
// has no buffer, and a client that refuses the certificate writes its
// alert while the server still writes the rest of its flight.
type queued struct {
	net.Conn
	ch chan []byte
}

func queue(c net.Conn) net.Conn {
	q := &queued{Conn: c, ch: make(chan []byte, 64)}
	go func() {
		for b := range q.ch {
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	return q
}

func (q *queued) Write(p []byte) (int, error) {
	q.ch <- bytes.Clone(p)
	return len(p), nil
}

func TestLeafIsTrustedForItsHostAlone(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	// The CA survives its PEM: flock-proxy loads what provision wrote.
	certPEM, keyPEM, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		server      *CA
		host        string
		roots       *CA
		ask, refuse string
	}{
		{"its host", ca, "api.github.com", ca, "api.github.com", ""},
		{"its host, any case", ca, "API.GitHub.com", ca, "api.github.com", ""},
		{"the loaded CA", loaded, "api.github.com", ca, "api.github.com", ""},
		{"another name", ca, "api.github.com", ca, "evil.example", "certificate is valid for api.github.com, not evil.example"},
		{"another CA", other, "api.github.com", ca, "api.github.com", "certificate signed by unknown authority"},
	} {
		err := handshake(t, tc.server, tc.host, tc.roots, tc.ask)
		if tc.refuse == "" && err != nil || tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.refuse)
		}
	}
	if c := ca.Certificate(); c.Subject.CommonName != CAName || c.NotAfter.Sub(c.NotBefore) != CALifetime+backdate {
		t.Errorf("the CA is %q valid %v", c.Subject.CommonName, c.NotAfter.Sub(c.NotBefore))
	}
}

func TestLoadCARefuses(t *testing.T) {
	ca, _ := NewCA()
	other, _ := NewCA()
	certPEM, _, _ := ca.PEM()
	_, otherKey, _ := other.PEM()
	leaf, _ := ca.Leaf("a.example")
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]})
	der, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	for name, pair := range map[string][2][]byte{
		"a key of another CA": {certPEM, otherKey},
		"no PEM":              {[]byte("x"), []byte("y")},
		"a leaf for a CA":     {leafPEM, leafKey},
	} {
		if _, err := LoadCA(pair[0], pair[1]); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestLeafCacheIsBoundedAndRenewed(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	ca.max = 3
	first, _ := ca.Leaf("h0.example")
	for i := range 10 {
		if _, err := ca.Leaf(fmt.Sprintf("h%d.example", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.Leaf("h0.example"); err != nil { // used, so kept
			t.Fatal(err)
		}
	}
	if ca.leaves.Len() != 3 || len(ca.byHost) != 3 {
		t.Fatalf("%d leaves kept (%d by host), want the cap, 3", ca.leaves.Len(), len(ca.byHost))
	}
	if again, _ := ca.Leaf("h0.example"); again != first {
		t.Error("the most used leaf was dropped before the least")
	}
	if _, ok := ca.byHost["h1.example"]; ok {
		t.Error("the least recently used leaf was kept past the cap")
	}
	if l := first.Leaf; l.NotAfter.Sub(l.NotBefore) != LeafLifetime+backdate || l.NotBefore.After(now.Add(-backdate)) {
		t.Errorf("a leaf valid %v to %v", l.NotBefore, l.NotAfter)
	}
	now = now.Add(LeafLifetime - LeafRenew + time.Minute)
	if renewed, _ := ca.Leaf("h0.example"); renewed == first || !renewed.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Error("a leaf within a day of its end was not made anew")
	}
	for _, bad := range []string{"", "localhost", "10.0.0.1", "a..example", "-a.example", "a_b.example", "*.example.com", strings.Repeat("a", 64) + ".example"} {
		if _, err := ca.Leaf(bad); err == nil {
			t.Errorf("a leaf for %q", bad)
		}
	}
}

func (q *queued) Close() error {
	close(q.ch)
	return q.Conn.Close()
}
