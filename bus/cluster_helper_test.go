package bus

// Helpers of the cluster tests: a test-only CA and host certificates
// (package cluster makes the real ones; this one must not depend on it),
// and N buses in this process forming one cluster on loopback.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/syncbuf"
	"github.com/flockrun/flock/spec"
)

// testCA is a certificate authority for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "flock test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// host writes the CA, a certificate for name at 127.0.0.1 (server and
// client use: routes verify both ways) and its key into dir, and returns
// a Cluster with their paths and the route password pw.
func (ca *testCA) host(t testing.TB, dir, name, pw string) Cluster {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cl := Cluster{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "host.crt"),
		KeyFile: filepath.Join(dir, "host.key"), PasswordFile: filepath.Join(dir, "route.password")}
	for path, data := range map[string][]byte{
		cl.CAFile:       ca.pem,
		cl.CertFile:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		cl.KeyFile:      pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		cl.PasswordFile: []byte(pw + "\n"),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

// freePorts are n loopback ports free a moment ago: a cluster's routes
// name each other's ports before any server runs.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// clusterFlock is orchestrator 1 and monitor 3 on host a, workers 5 on
// a, 2 on b and 4 on c.
func clusterFlock() *spec.Flock {
	f := twoWorkers()
	f.Agents = append(f.Agents, spec.Agent{ID: 5, Role: spec.RoleWorker, TaskTimeout: spec.DefaultTimeout})
	return f
}

var clusterHosts = map[int]string{1: "a", 3: "a", 5: "a", 2: "b", 4: "c"}

var clusterUsers = append([]string{"flock-5"}, everyoneAnd4...)

// testCluster is n buses (hosts a, b, c, ...) of one cluster: their
// configs (client and cluster ports fixed, so a bus restarts where it
// was), store directories and the running servers.
type testCluster struct {
	t       testing.TB
	ca      *testCA
	ids     identities
	configs []Config
	dirs    []string
	servers []*Server
	logs    []*syncbuf.Buffer
	reloads []atomic.Int32 // OnReload calls, by bus
}

func hostName(i int) string { return string(rune('a' + i)) }

// prepareTestCluster is n buses' configs and stores, none started.
func prepareTestCluster(t testing.TB, n int, change ...func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, ids: newIdentities(t, clusterUsers...), reloads: make([]atomic.Int32, n)}
	ca := newTestCA(t)
	tc.ca = ca
	ports := freePorts(t, 2*n)
	for i := range n {
		dir := t.TempDir()
		c := ForFlock(clusterFlock(), tc.ids.keys())
		c.Listen = "127.0.0.1:" + strconv.Itoa(ports[i])
		c.Tasks.AckWait = time.Second
		c.Tasks.StoreMax = MinStoreMax
		cl := ca.host(t, dir, hostName(i), "route-secret")
		cl.Name, cl.Server, cl.Replicas, cl.Hosts = spec.ClusterName, hostName(i), min(n, 3), clusterHosts
		cl.Listen = "127.0.0.1:" + strconv.Itoa(ports[n+i])
		for j := range n {
			if j != i {
				cl.Routes = append(cl.Routes, "127.0.0.1:"+strconv.Itoa(ports[n+j]))
				cl.Peers = append(cl.Peers, hostName(j))
			}
		}
		c.Cluster = &cl
		for _, f := range change {
			f(&c)
		}
		tc.configs = append(tc.configs, c)
		tc.dirs = append(tc.dirs, dir)
		tc.servers = append(tc.servers, nil)
		tc.logs = append(tc.logs, &syncbuf.Buffer{})
	}
	for i := range n {
		if err := os.Mkdir(filepath.Join(tc.dirs[i], "store"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return tc
}

// newTestCluster is a cluster of n buses, all started.
func newTestCluster(t testing.TB, n int, change ...func(*Config)) *testCluster {
	t.Helper()
	tc := prepareTestCluster(t, n, change...)
	for i := range n {
		tc.start(i)
	}
	return tc
}

// start starts bus i (again), shut down when the test ends.
func (tc *testCluster) start(i int) *Server {
	tc.t.Helper()
	s, err := Start(tc.configs[i], Options{StoreDir: filepath.Join(tc.dirs[i], "store"), Log: io.MultiWriter(tc.logs[i], prefixLog{tc.t, hostName(i)}),
		OnReload: func() error { tc.reloads[i].Add(1); return nil }})
	if err != nil {
		tc.t.Fatalf("starting bus %s: %v", hostName(i), err)
	}
	tc.t.Cleanup(func() {
		start := time.Now()
		s.Shutdown()
		tc.t.Logf("shutdown of %s took %s", hostName(i), time.Since(start))
	})
	tc.servers[i] = s
	return s
}

// prefixLog writes a bus's log lines to the test's log, named.
type prefixLog struct {
	t    testing.TB
	name string
}

func (l prefixLog) Write(p []byte) (int, error) {
	if os.Getenv("FLOCK_TEST_BUS_LOG") != "" {
		l.t.Log(fmt.Sprintf("[%s] %s", l.name, p))
	}
	return len(p), nil
}

// waitReady waits until every running bus has its streams (and so
// JetStream a meta leader).
func (tc *testCluster) waitReady() {
	tc.t.Helper()
	waitForWithin(tc.t, 60*time.Second, "every bus to have its streams", func() bool {
		for _, s := range tc.servers {
			if s != nil && !s.ready.Load() {
				return false
			}
		}
		return true
	})
}
