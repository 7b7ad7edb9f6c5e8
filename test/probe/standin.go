package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flockrun/flock/test/standin"
)

// standinServe runs the model APIs' stand-in (package standin) on addr
// over TLS: a certificate for *.model.test signed by a CA of its own,
// kept in CA_DIR (ca.pem, the provider's ca_file, as a private gateway's
// would be, and its key), made at the first start and used again at the
// next (a reboot of the machine keeps the CA the proxy trusts). It
// expects Anthropic's, OpenAI's and Gemini's keys in the three files
// given (read at its start: a key on a command line would be in every
// process's sight). GET /standin/ledger?tag=T answers what it
// reported (JSON); GET /standin/seen every request's method and path.
// CA_DIR "-" serves plain HTTP, keyless (a model server on the host, as
// Ollama on 127.0.0.1:11434): it then refuses any request with a key.
func standinServe(args []string) error {
	if len(args) != 5 && !(len(args) == 2 && args[1] == "-") {
		return errors.New("usage: probe standin-serve ADDR CA_DIR ANTHROPIC_KEY_FILE OPENAI_KEY_FILE GEMINI_KEY_FILE | probe standin-serve ADDR -")
	}
	if args[1] == "-" {
		return http.ListenAndServe(args[0], standinMux(&standin.Server{Keyless: true}))
	}
	var keys [3]string
	for i, p := range args[2:] {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		keys[i] = strings.TrimSpace(string(b))
	}
	cert, err := caLeaf(args[1], "api.model.test", "*.model.test")
	if err != nil {
		return err
	}
	return serveTLS(args[0], cert, standinMux(&standin.Server{AnthropicKey: keys[0], OpenAIKey: keys[1], GeminiKey: keys[2]}))
}

// caLeaf is a server certificate for names (and 127.0.0.1), signed by
// the test CA in dir (testCA), valid for two days.
func caLeaf(dir, cn string, names ...string) (tls.Certificate, error) {
	ca, caKey, err := testCA(dir)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), DNSNames: names, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// serveTLS serves h on addr with cert, HTTP/2 and HTTP/1.1.
func serveTLS(addr string, cert tls.Certificate, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	return srv.ServeTLS(ln, "", "")
}

// testCA reads the CA in dir, or makes one there: ca.pem (public, for
// clients to trust) and ca-key.pem (root's).
func testCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		cert, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return nil, nil, err
		}
		return cert, c.PrivateKey.(*ecdsa.PrivateKey), nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flock test model CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})); err != nil {
		return nil, nil, err
	}
	if err := writeAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return nil, nil, err
	}
	if err := os.Chmod(certPath, 0o644); err != nil { // public: for clients to trust
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// standinMux is s with its ledger and what it saw.
func standinMux(s *standin.Server) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", s)
	mux.HandleFunc("GET /standin/ledger", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(s.Reported(r.URL.Query().Get("tag")))
	})
	mux.HandleFunc("GET /standin/seen", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(s.Seen())
	})
	return mux
}
