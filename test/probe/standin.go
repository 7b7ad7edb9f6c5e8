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
	"time"

	"github.com/flockrun/flock/test/standin"
)

// standinServe runs the model APIs' stand-in (package standin) on addr
// over TLS: a certificate for *.model.test signed by a throw-away CA of
// its own, whose certificate it writes to CA_OUT (the provider's
// ca_file, as a private gateway's would be). It expects the two keys
// given. GET /standin/ledger?tag=T answers what it reported (JSON).
func standinServe(args []string) error {
	if len(args) != 4 {
		return errors.New("usage: probe standin-serve ADDR CA_OUT ANTHROPIC_KEY OPENAI_KEY")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flock test model CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.model.test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), DNSNames: []string{"*.model.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeAtomic(args[1], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})); err != nil {
		return err
	}
	if err := os.Chmod(args[1], 0o644); err != nil {
		return err
	}
	s := &standin.Server{AnthropicKey: args[2], OpenAIKey: args[3]}
	mux := http.NewServeMux()
	mux.Handle("/", s)
	mux.HandleFunc("GET /standin/ledger", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(s.Reported(r.URL.Query().Get("tag")))
	})
	mux.HandleFunc("GET /standin/seen", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(s.Seen())
	})
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}}
	return srv.ServeTLS(ln, "", "")
}
