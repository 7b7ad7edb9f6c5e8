package secrets

import (
	"container/list"
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
	"strings"
	"sync"
	"time"
)

// CA is a flock's own certificate authority for flock-proxy: it mints the
// leaf certificates with which the proxy terminates an agent's TLS toward
// the hosts of its secrets. Agents trust its certificate; its key is only
// ever where the caller puts it (PEM), which is flock-proxy's alone.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey

	// now is the clock, a field for the tests.
	now func() time.Time
	// leaves are the minted leaves by host, the most recently used first,
	// at most max: the names come from agents, who may ask for many.
	mu     sync.Mutex
	max    int
	leaves *list.List
	byHost map[string]*list.Element
}

// Lifetimes and bounds of what a CA makes.
const (
	CAName         = "flock proxy CA"
	CALifetime     = 10 * 365 * 24 * time.Hour
	LeafLifetime   = 7 * 24 * time.Hour
	LeafRenew      = 24 * time.Hour // a leaf is made anew this long before its end
	DefaultLeafCap = 4096
	// backdate lets a client whose clock is a little behind accept a
	// certificate made just now.
	backdate = time.Hour
)

type leaf struct {
	host     string
	cert     *tls.Certificate
	notAfter time.Time
}

// NewCA makes a CA: an ECDSA P-256 key and a certificate valid 10 years,
// that signs leaves only.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secrets: making the CA's key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: CAName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("secrets: making the CA's certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("secrets: reading back the CA's certificate: %w", err)
	}
	return newCA(cert, key), nil
}

func newCA(cert *x509.Certificate, key *ecdsa.PrivateKey) *CA {
	return &CA{cert: cert, key: key, now: time.Now, max: DefaultLeafCap, leaves: list.New(), byHost: map[string]*list.Element{}}
}

// PEM is the CA's certificate, for the agents to trust, and its key, for
// flock-proxy alone.
func (ca *CA) PEM() (certPEM, keyPEM []byte, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: encoding the CA's key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// Certificate is the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// LoadCA reads a CA that PEM wrote: a CA certificate and its ECDSA key,
// which must belong together.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("secrets: reading the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("secrets: reading the CA's certificate: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	switch {
	case !ok:
		return nil, fmt.Errorf("secrets: the CA's key is a %T, not ECDSA", pair.PrivateKey)
	case !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, errors.New("secrets: the CA's certificate is not a CA's (no basic constraints, or no certificate signing)")
	}
	return newCA(cert, key), nil
}

// Leaf is a certificate for host, a DNS name, signed by the CA: valid
// from an hour ago for 7 days, made anew a day before its end. Leaves are
// kept, the least recently used dropped past the cap.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	host = strings.ToLower(host)
	if err := checkName(host); err != nil {
		return nil, err
	}
	now := ca.now()
	ca.mu.Lock()
	if e, ok := ca.byHost[host]; ok && now.Before(e.Value.(*leaf).notAfter.Add(-LeafRenew)) {
		ca.leaves.MoveToFront(e)
		ca.mu.Unlock()
		return e.Value.(*leaf).cert, nil
	}
	ca.mu.Unlock()

	l, err := ca.mint(host, now)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if e, ok := ca.byHost[host]; ok {
		ca.leaves.Remove(e)
	}
	ca.byHost[host] = ca.leaves.PushFront(l)
	for ca.leaves.Len() > ca.max {
		old := ca.leaves.Remove(ca.leaves.Back()).(*leaf)
		delete(ca.byHost, old.host)
	}
	return l.cert, nil
}

func (ca *CA) mint(host string, now time.Time) (*leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("secrets: making the key of %s's leaf: %w", host, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(LeafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{host},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("secrets: signing %s's leaf: %w", host, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("secrets: reading back %s's leaf: %w", host, err)
	}
	return &leaf{host: host, notAfter: tmpl.NotAfter,
		cert: &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed}}, nil
}

// checkName refuses what is not a DNS name: the host comes from an
// agent's ClientHello.
func checkName(host string) error {
	bad := func(why string) error { return fmt.Errorf("secrets: no leaf for %q: %s", host, why) }
	if host == "" || len(host) > 253 {
		return bad("not 1-253 characters")
	}
	labels := strings.Split(host, ".")
	if len(labels) < 2 {
		return bad("a single label")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return bad("an empty or malformed label")
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return bad("not a letter, digit or - in a label")
			}
		}
	}
	if last := labels[len(labels)-1]; last[0] >= '0' && last[0] <= '9' {
		return bad("an address, not a name")
	}
	return nil
}

// serial is a random positive serial number of 127 bits.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) // crypto/rand does not fail
	return n.Add(n, big.NewInt(1))
}
