package cluster

// Tier: unit (openssl on PATH for TestOpensslVerifiesTheCertificates).

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/tier"
	"github.com/flockrun/flock/spec"
)

var (
	t0    = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	hosts = []spec.Host{
		{Name: "a", Address: netip.MustParseAddr("10.77.0.11")},
		{Name: "b", Address: netip.MustParseAddr("10.77.0.12")},
		{Name: "c", Address: netip.MustParseAddr("fd00:77::13")},
	}
)

// rel is made relative to dir, for readable comparisons.
func rel(t *testing.T, dir string, made []string) []string {
	t.Helper()
	var out []string
	for _, p := range made {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func ensure(t *testing.T, dir string, hs []spec.Host, now time.Time) []string {
	t.Helper()
	made, err := EnsureAuthority(dir, hs, now)
	if err != nil {
		t.Fatalf("EnsureAuthority: %v", err)
	}
	return rel(t, dir, made)
}

func hostFiles(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "hosts/"+n+".key", "hosts/"+n+".crt")
	}
	return out
}

func TestEnsureAuthorityMakesEverythingOnceWithItsModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "authority")
	want := append([]string{"secret", "ca.key", "ca.crt"}, hostFiles("a", "b", "c")...)
	if got := ensure(t, dir, hosts, t0); !slices.Equal(got, want) {
		t.Errorf("first run made %v, want %v", got, want)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{"", 0o700 | os.ModeDir}, {"hosts", 0o700 | os.ModeDir},
		{"secret", 0o600}, {"ca.key", 0o600}, {"ca.crt", 0o644},
		{"hosts/a.key", 0o600}, {"hosts/a.crt", 0o644}, {"hosts/c.key", 0o600}, {"hosts/c.crt", 0o644},
	} {
		fi, err := os.Stat(filepath.Join(dir, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, fi.Mode(), tc.mode)
		}
	}
	if _, err := LoadSecret(dir); err != nil {
		t.Errorf("LoadSecret of the made secret: %v", err)
	}
	// A day later nothing is due: nothing is made, nothing rewritten.
	if got := ensure(t, dir, hosts, t0.Add(24*time.Hour)); len(got) != 0 {
		t.Errorf("second run made %v, want nothing", got)
	}
	ca := mustCert(t, filepath.Join(dir, CAFile))
	if !ca.IsCA || ca.NotAfter.Sub(t0) < CALifetime-time.Minute || ca.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA: IsCA %v, ends %v, algorithm %v", ca.IsCA, ca.NotAfter, ca.PublicKeyAlgorithm)
	}
	c := mustCert(t, filepath.Join(dir, "hosts", "c.crt"))
	if !slices.Equal(c.DNSNames, []string{"c"}) || len(c.IPAddresses) != 1 || c.IPAddresses[0].String() != "fd00:77::13" ||
		c.NotAfter.Sub(t0) < HostLifetime-time.Minute || c.NotAfter.Sub(t0) > HostLifetime ||
		!slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Errorf("host c: SANs %v %v, ends %v, usages %v", c.DNSNames, c.IPAddresses, c.NotAfter, c.ExtKeyUsage)
	}
}

func TestEnsureAuthorityRenewsWhatIsNoLongerGood(t *testing.T) {
	other := t.TempDir()
	ensure(t, other, hosts, t0) // another flock's authority
	moved := slices.Clone(hosts)
	moved[1].Address = netip.MustParseAddr("10.77.0.22")
	renamed := slices.Clone(hosts)
	renamed[0].Name = "a2"
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		hosts  []spec.Host
		now    time.Time
		want   []string
	}{
		{"a host's certificate is missing", func(t *testing.T, dir string) { rm(t, dir, "hosts/b.crt") }, hosts, t0, hostFiles("b")},
		{"a host's key is missing", func(t *testing.T, dir string) { rm(t, dir, "hosts/a.key") }, hosts, t0, hostFiles("a")},
		{"a host's certificate is garbage", func(t *testing.T, dir string) { write(t, dir, "hosts/c.crt", "junk") }, hosts, t0, hostFiles("c")},
		{"a host's key is another host's", func(t *testing.T, dir string) { cp(t, dir, "hosts/b.key", dir, "hosts/a.key") }, hosts, t0, hostFiles("a")},
		{"a host moved", nil, moved, t0, hostFiles("b")},
		{"a host was renamed, one added", nil, append(renamed, spec.Host{Name: "d", Address: netip.MustParseAddr("10.77.0.14")}), t0, hostFiles("a2", "d")},
		{"signed by another CA", func(t *testing.T, dir string) {
			cp(t, other, "hosts/c.crt", dir, "hosts/c.crt")
			cp(t, other, "hosts/c.key", dir, "hosts/c.key")
		}, hosts, t0, hostFiles("c")},
		{"31 days left: kept", nil, hosts, t0.Add(HostLifetime - 31*24*time.Hour), nil},
		{"29 days left: renewed", nil, hosts, t0.Add(HostLifetime - 29*24*time.Hour), hostFiles("a", "b", "c")},
		{"the CA key is missing: a new CA, new hosts", func(t *testing.T, dir string) { rm(t, dir, "ca.key") }, hosts, t0,
			append([]string{"ca.key", "ca.crt"}, hostFiles("a", "b", "c")...)},
		{"the CA is another flock's", func(t *testing.T, dir string) { cp(t, other, "ca.crt", dir, "ca.crt") }, hosts, t0,
			append([]string{"ca.key", "ca.crt"}, hostFiles("a", "b", "c")...)},
		{"the CA ends in 29 days", nil, hosts, t0.Add(CALifetime - 29*24*time.Hour),
			append([]string{"ca.key", "ca.crt"}, hostFiles("a", "b", "c")...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ensure(t, dir, hosts, t0)
			secret, _ := os.ReadFile(filepath.Join(dir, SecretFile))
			if tc.change != nil {
				tc.change(t, dir)
			}
			if got := ensure(t, dir, tc.hosts, tc.now); !slices.Equal(got, tc.want) {
				t.Errorf("made %v, want %v", got, tc.want)
			}
			if again := ensure(t, dir, tc.hosts, tc.now); len(again) != 0 {
				t.Errorf("the run after made %v, want nothing", again)
			}
			if now, _ := os.ReadFile(filepath.Join(dir, SecretFile)); string(now) != string(secret) {
				t.Errorf("the secret changed")
			}
			verifyAll(t, dir, tc.hosts, tc.now)
		})
	}
}

func TestEnsureAuthorityRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret string
		hosts  []spec.Host
		want   string
	}{
		{"a secret that is not hex", "not hex\n", hosts, "is not hex"},
		{"a short secret", "abcd\n", hosts, "has 2 bytes, want 32"},
		{"a host name with a slash", "", []spec.Host{{Name: "../x", Address: netip.MustParseAddr("10.0.0.1")}}, `name "../x"`},
		{"a host without address", "", []spec.Host{{Name: "a"}}, "no address"},
		{"a host twice", "", []spec.Host{hosts[0], hosts[0]}, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.secret != "" {
				write(t, dir, SecretFile, tc.secret)
			}
			made, err := EnsureAuthority(dir, tc.hosts, t0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
			if len(made) != 0 {
				t.Errorf("made %v despite the error", made)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, SecretFile)); tc.secret != "" && string(got) != tc.secret {
				t.Errorf("the bad secret was replaced")
			}
		})
	}
}

func TestOpensslVerifiesTheCertificates(t *testing.T) {
	tier.RequireNeeds(t, "unit (openssl)", tier.Program("openssl", "openssl"))
	dir := t.TempDir()
	ensure(t, dir, hosts, time.Now())
	for _, h := range hosts {
		for _, purpose := range []string{"sslserver", "sslclient"} {
			crt := filepath.Join(dir, HostsDir, h.Name+".crt")
			out, err := exec.Command("openssl", "verify", "-CAfile", filepath.Join(dir, CAFile), "-purpose", purpose, crt).CombinedOutput()
			if err != nil || !strings.Contains(string(out), ": OK") {
				t.Errorf("openssl verify -purpose %s %s: %v\n%s", purpose, h.Name, err, out)
			}
		}
		// The key is the certificate's.
		pub := func(args ...string) string {
			out, err := exec.Command("openssl", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("openssl %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		if a, b := pub("x509", "-noout", "-pubkey", "-in", filepath.Join(dir, HostsDir, h.Name+".crt")),
			pub("pkey", "-pubout", "-in", filepath.Join(dir, HostsDir, h.Name+".key")); a != b {
			t.Errorf("host %s: the key's public half is not the certificate's", h.Name)
		}
	}
	other := t.TempDir()
	ensure(t, other, hosts[:1], time.Now())
	if out, err := exec.Command("openssl", "verify", "-CAfile", filepath.Join(dir, CAFile), filepath.Join(other, HostsDir, "a.crt")).CombinedOutput(); err == nil {
		t.Errorf("openssl verified another flock's certificate:\n%s", out)
	}
}

// TestMutualTLS: a route is mutual TLS, and either bus may dial: each
// host's certificate serves and is accepted as a client, both ways; one
// from another flock's CA is refused.
func TestMutualTLS(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	ensure(t, dir, hosts, time.Now())
	ensure(t, other, hosts, time.Now())
	a, b, c := pair(t, dir, "a"), pair(t, dir, "b"), pair(t, dir, "c")
	stranger := pair(t, other, "a")
	pool := caPool(t, dir)
	for _, tc := range []struct {
		name           string
		client, server tls.Certificate
		serverAddr     netip.Addr
		ok             bool
	}{
		{"a dials b", a, b, hosts[1].Address, true},
		{"b dials a", b, a, hosts[0].Address, true},
		{"c (IPv6) dials a", c, a, hosts[0].Address, true},
		{"a stranger dials a", stranger, a, hosts[0].Address, false},
		{"a dials a stranger", a, stranger, hosts[0].Address, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, sc := net.Pipe()
			defer cc.Close()
			defer sc.Close()
			srv := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{tc.server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
			cli := tls.Client(cc, &tls.Config{Certificates: []tls.Certificate{tc.client}, RootCAs: pool, ServerName: tc.serverAddr.String(), MinVersion: tls.VersionTLS12})
			deadline := time.Now().Add(5 * time.Second)
			_ = cc.SetDeadline(deadline)
			_ = sc.SetDeadline(deadline)
			serr := make(chan error, 1)
			go func() {
				err := srv.Handshake()
				if err == nil {
					_, err = srv.Write([]byte("ok"))
				}
				serr <- err
				if err != nil {
					sc.Close() // unblock the client's read
				}
			}()
			cerr := cli.Handshake()
			if cerr == nil {
				buf := make([]byte, 2)
				_, cerr = cli.Read(buf) // TLS 1.3: the server's verdict on our certificate arrives after
			}
			err := <-serr
			if tc.ok && (cerr != nil || err != nil) {
				t.Errorf("client: %v; server: %v", cerr, err)
			}
			if !tc.ok && cerr == nil && err == nil {
				t.Errorf("handshake succeeded, want refused")
			}
			if tc.ok && srv.ConnectionState().PeerCertificates[0].Subject.CommonName != tc.client.Leaf.Subject.CommonName {
				t.Errorf("server saw %q", srv.ConnectionState().PeerCertificates[0].Subject.CommonName)
			}
		})
	}
}

func pair(t *testing.T, dir, name string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, HostsDir, name+".crt"), filepath.Join(dir, HostsDir, name+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func caPool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(mustCert(t, filepath.Join(dir, CAFile)))
	return pool
}

// verifyAll checks every host's pair against the CA at now, for both uses.
func verifyAll(t *testing.T, dir string, hs []spec.Host, now time.Time) {
	t.Helper()
	pool := caPool(t, dir)
	for _, h := range hs {
		p := pair(t, dir, h.Name)
		if _, err := p.Leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: h.Address.String(),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("host %s at %v: %v", h.Name, now, err)
		}
	}
}

func mustCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := readCert(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rm(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func cp(t *testing.T, fromDir, from, toDir, to string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fromDir, from))
	if err != nil {
		t.Fatal(err)
	}
	write(t, toDir, to, string(data))
}
