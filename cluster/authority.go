package cluster

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/flockrun/flock/spec"
)

// Lifetimes of what EnsureAuthority makes, and how long before its end a
// certificate is made anew (an Ansible run a month ahead replaces it).
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	HostLifetime = 2 * 365 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
)

// backdate is how far NotBefore is set in the past, so a host whose clock
// is a little behind the authority's accepts a certificate made just now.
const backdate = time.Hour

// CAName is the CA's subject common name.
const CAName = "flock cluster CA"

var hostName = regexp.MustCompile(`^[a-z0-9-]{1,63}$`)

// EnsureAuthority makes in dir whatever of the flock's cluster material is
// missing or no longer good, and returns the paths it wrote, in order
// (none when everything was good):
//
//   - secret: 32 random bytes, hex; kept once made (an unreadable one is an
//     error, never replaced: every agent's key derives from it);
//   - ca.crt, ca.key: an ECDSA P-256 CA valid 10 years, made anew when
//     either is missing or unreadable, they do not belong together, or it
//     ends within 30 days (then every host certificate is made anew too);
//   - hosts/<name>.crt, .key for each host: ECDSA P-256, 2 years, SANs its
//     name and address, for server and client auth (a route's TLS is
//     mutual: each bus is the client of the routes it dials), made anew
//     when missing, unreadable, not for that name and address, ending
//     within 30 days, not signed by the CA, or not matching its key.
//
// dir is 0700, keys and the secret 0600, certificates 0644. Each file is
// written whole (a temporary file renamed), so an interrupted run leaves
// either the old file or the new one.
func EnsureAuthority(dir string, hosts []spec.Host, now time.Time) (made []string, err error) {
	for i, h := range hosts {
		if !hostName.MatchString(h.Name) {
			return nil, fmt.Errorf("cluster: hosts[%d]: name %q: use 1 to 63 of a-z, 0-9 and -", i, h.Name)
		}
		if !h.Address.IsValid() {
			return nil, fmt.Errorf("cluster: hosts[%d] (%s): no address", i, h.Name)
		}
		if slices.IndexFunc(hosts[:i], func(o spec.Host) bool { return o.Name == h.Name }) >= 0 {
			return nil, fmt.Errorf("cluster: hosts[%d]: name %q is listed twice", i, h.Name)
		}
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	if err := ensureDir(filepath.Join(dir, HostsDir)); err != nil {
		return nil, err
	}
	w := &writer{}

	secretPath := filepath.Join(dir, SecretFile)
	switch _, err := os.Stat(secretPath); {
	case errors.Is(err, fs.ErrNotExist):
		s := make([]byte, SecretSize)
		if _, err := rand.Read(s); err != nil {
			return nil, fmt.Errorf("cluster: making the secret: %w", err)
		}
		if err := w.write(secretPath, []byte(hex.EncodeToString(s)+"\n"), 0o600); err != nil {
			return w.made, err
		}
	case err != nil:
		return nil, fmt.Errorf("cluster: reading the secret: %w", err)
	default:
		if _, err := LoadSecret(dir); err != nil {
			return nil, fmt.Errorf("%w (or, if no host has it yet, delete it and run again to make a new one)", err)
		}
	}

	ca, caKey, ok := loadCA(dir, now)
	if !ok {
		if ca, caKey, err = newCA(now); err != nil {
			return w.made, err
		}
		keyPEM, err := keyPEM(caKey)
		if err != nil {
			return w.made, err
		}
		if err := w.write(filepath.Join(dir, CAKeyFile), keyPEM, 0o600); err != nil {
			return w.made, err
		}
		if err := w.write(filepath.Join(dir, CAFile), certPEM(ca.Raw), 0o644); err != nil {
			return w.made, err
		}
	}

	for _, h := range hosts {
		crtPath := filepath.Join(dir, HostsDir, h.Name+".crt")
		keyPath := filepath.Join(dir, HostsDir, h.Name+".key")
		if hostGood(crtPath, keyPath, h, ca, now) {
			continue
		}
		crt, key, err := newHostCert(h, ca, caKey, now)
		if err != nil {
			return w.made, err
		}
		if err := w.write(keyPath, key, 0o600); err != nil {
			return w.made, err
		}
		if err := w.write(crtPath, crt, 0o644); err != nil {
			return w.made, err
		}
	}
	return w.made, nil
}

func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: making %s: %w", dir, err)
	}
	// MkdirAll leaves an existing directory's mode alone.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("cluster: making %s private (0700): %w", dir, err)
	}
	return nil
}

// writer writes files whole and remembers which it wrote.
type writer struct{ made []string }

func (w *writer) write(path string, data []byte, mode os.FileMode) error {
	if err := writeFile(path, data, mode); err != nil {
		return fmt.Errorf("cluster: writing %s: %w", path, err)
	}
	w.made = append(w.made, path)
	return nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename anyway
	err = tmp.Chmod(mode)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}

// loadCA reads the CA; ok is false when it must be made anew.
func loadCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, bool) {
	ca, err := readCert(filepath.Join(dir, CAFile))
	if err != nil || !ca.IsCA || ca.NotAfter.Sub(now) < RenewBefore {
		return nil, nil, false
	}
	key, err := readKey(filepath.Join(dir, CAKeyFile))
	if err != nil || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, false
	}
	return ca, key, true
}

// hostGood says whether a host's certificate and key can stay.
func hostGood(crtPath, keyPath string, h spec.Host, ca *x509.Certificate, now time.Time) bool {
	crt, err := readCert(crtPath)
	if err != nil {
		return false
	}
	key, err := readKey(keyPath)
	if err != nil || !key.PublicKey.Equal(crt.PublicKey) {
		return false
	}
	if !slices.Equal(crt.DNSNames, []string{h.Name}) || len(crt.IPAddresses) != 1 || !crt.IPAddresses[0].Equal(net.IP(h.Address.Unmap().AsSlice())) {
		return false
	}
	if crt.NotAfter.Sub(now) < RenewBefore {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err = crt.Verify(x509.VerifyOptions{
		Roots: roots, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return false
	}
	// Verify accepts either usage; a route needs both.
	return slices.Contains(crt.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && slices.Contains(crt.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
}

func newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: making the CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: CAName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true, // it signs host certificates, never another CA
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: making the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: reading back the CA certificate: %w", err)
	}
	return ca, key, nil
}

func newHostCert(h spec.Host, ca *x509.Certificate, caKey crypto.Signer, now time.Time) (crtPEM, kPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: making the key of host %s: %w", h.Name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: h.Name},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(HostLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{h.Name},
		IPAddresses:  []net.IP{net.IP(h.Address.Unmap().AsSlice())},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: making the certificate of host %s: %w", h.Name, err)
	}
	kPEM, err = keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM(der), kPEM, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("cluster: making a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // positive, never zero
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("cluster: encoding a key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// readCert reads the one certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, rest := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%s: not one PEM certificate", path)
	}
	return x509.ParseCertificate(b.Bytes)
}

// readKey reads an ECDSA key (PKCS#8 or SEC 1) from a PEM file.
func readKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s: no PEM key", path)
	}
	if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", path)
	}
	return ek, nil
}
