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
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
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

// freePorts are n loopback ports for this test alone, until it ends: a
// cluster's routes name each other's ports before any server runs, and
// a bus started again takes its ports back. The tests run in parallel,
// so a port merely free a moment ago would not do: another test's server
// on port 0, or its client's end of a connection, could land on it in
// between. These are drawn below the kernel's ephemeral range, where
// neither ever lands; none is handed out twice in this process, and on
// Linux an abstract socket named after each keeps another process running
// these tests off it.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	from, to := reservablePorts()
	if from == to {
		t.Fatal("no loopback ports outside the kernel's ephemeral range (net.ipv4.ip_local_port_range) for the tests to hold")
	}
	reserved.mu.Lock()
	defer reserved.mu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no free loopback port in %d-%d after %d tries", from, to-1, tries)
		}
		p := from + mrand.IntN(to-from)
		if reserved.ports[p] {
			continue
		}
		reserved.ports[p] = true
		if !holdPort(t, p) {
			continue // another process's
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken by some other program
		}
		l.Close()
		ports = append(ports, p)
	}
	return ports
}

// reserved is every port freePorts handed out in this process.
var reserved = struct {
	mu    sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// reservablePorts is the range freePorts draws from: [from, to), below
// the kernel's ephemeral ports (or above them, if there is no room
// below); empty if there is room on neither side.
var reservablePorts = sync.OnceValues(func() (from, to int) {
	low, high := 32768, 60999 // Linux's default; below macOS's 49152 too
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil {
				low, high = l, h
			}
		}
	}
	switch {
	case low > 11000:
		return 10000, low
	case low > 2024:
		return 1024, low
	case high < 64535:
		return high + 1, 65536
	}
	return 0, 0
})

// holdPort keeps port p this process's until the test ends, as far as
// other processes running these tests go: on Linux, by listening on an
// abstract socket named after it (no file; gone with the process).
func holdPort(t testing.TB, p int) bool {
	if runtime.GOOS != "linux" {
		return true
	}
	l, err := net.Listen("unix", "@flock-bus-test-port-"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	t.Cleanup(func() { l.Close() })
	return true
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
