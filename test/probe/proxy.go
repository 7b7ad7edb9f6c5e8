package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"
)

// tlsServe answers every HTTPS request on addr with "hello from NAME"
// (NAME: the SNI), with a throw-away self-signed certificate: the test's
// upstream server, run by root in the test machine.
func tlsServe(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return errors.New("usage: probe tls-serve ADDR [CERT_OUT]")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	// Its own root: a client that trusts CERT_OUT (NODE_EXTRA_CA_CERTS,
	// curl --cacert) verifies it as it would an API's chain.
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flock test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"*.flock.test"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if len(args) == 2 {
		if err := writeAtomic(args[1], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
			return err
		}
		if err := os.Chmod(args[1], 0o644); err != nil { // a public certificate, for agents to trust
			return err
		}
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from %s\n", r.TLS.ServerName)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
	}
	return srv.ServeTLS(ln, "", "")
}
