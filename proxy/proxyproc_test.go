package proxy

// Tier: unit (the benchmarks' proxy in a process of its own).

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

// procEnv set to 1 makes the test binary a proxy (procProxy) instead of
// running the tests: a benchmark measures its memory and CPU apart from
// the clients' and the upstream's.
const procEnv = "FLOCK_PROXY_BENCH_PROC"

func TestMain(m *testing.M) {
	if os.Getenv(procEnv) == "1" {
		if err := runProcProxy(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "proxy process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// procConfig is what the proxy process is given on its stdin: where the
// upstream is and its CA, the flock's CA, and the agents. Agent i's
// uid is procUID(i), its connections come from procAddr(i), and it is
// granted the api secret (bound to api.example.com) with its own
// placeholder.
type procConfig struct {
	Upstream      string
	UpstreamCA    []byte // PEM
	CACert, CAKey []byte // PEM
	Placeholders  []string
}

func procUID(i int) uint32 { return 3000 + uint32(i) }

// procAddr is agent i's address on loopback (Linux answers all of
// 127/8).
func procAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)}) }

// byAddr is the uid of a client by its address (procAddr).
type byAddr struct{}

func (byAddr) UID(client, _ netip.AddrPort) (uint32, error) {
	a := client.Addr().As4()
	if a[0] != 127 || a[1] != 1 {
		return 0, errors.New("not an agent's address")
	}
	return procUID(int(a[2])<<8 | int(a[3])), nil
}

// runProcProxy reads a procConfig from in, serves a proxy for it on
// loopback, writes its address to out and serves until in closes.
func runProcProxy(in io.Reader, out io.Writer) error {
	var cfg procConfig
	dec := json.NewDecoder(in)
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ca, err := secrets.LoadCA(cfg.CACert, cfg.CAKey)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cfg.UpstreamCA) {
		return errors.New("config: UpstreamCA: no certificate")
	}
	var egress []spec.Egress
	for _, r := range []string{"api.example.com:443", "plain.example.com:443"} {
		e, err := spec.ParseEgress(r)
		if err != nil {
			return err
		}
		egress = append(egress, e)
	}
	api := spec.Secret{Name: "api", Hosts: []string{"api.example.com:443"}, Env: []string{"API_KEY"}}
	pol, ic := Policy{Agents: map[uint32]AgentRules{}}, Intercept{CA: ca, Agents: map[uint32]secrets.Bindings{}}
	for i, ph := range cfg.Placeholders {
		pol.Agents[procUID(i)] = AgentRules{ID: i + 1, Rules: egress, Tunnels: spec.DefaultTunnels, Handshakes: spec.DefaultHandshakes}
		ic.Agents[procUID(i)] = secrets.Bindings{secrets.Bind(api, []byte(apiSecret), ph)}
	}
	srv := &Server{UIDs: byAddr{}, Resolver: secretDNS, Roots: roots,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, cfg.Upstream)
		}}
	srv.SetPolicy(pol)
	srv.SetIntercept(ic)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(ln)
	fmt.Fprintln(out, ln.Addr())
	io.Copy(io.Discard, in) // until the benchmark is done with it
	return nil
}

// procProxy is a proxy process started for a benchmark.
type procProxy struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startProcProxy runs the test binary as a proxy for r's upstream and
// CA, for agents with the placeholders given; it ends with tb.
func startProcProxy(tb testing.TB, r *secretRig, placeholders []string) *procProxy {
	tb.Helper()
	certPEM, keyPEM, err := r.flockCA.PEM()
	if err != nil {
		tb.Fatal(err)
	}
	cfg := procConfig{Upstream: r.upstream.Listener.Addr().String(), CACert: certPEM, CAKey: keyPEM, Placeholders: placeholders,
		UpstreamCA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.upstreamCA.Certificate().Raw})}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), procEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%s: %v", cmd, err)
	}
	p := &procProxy{cmd: cmd, stdin: stdin}
	tb.Cleanup(p.stop)
	if err := json.NewEncoder(stdin).Encode(cfg); err != nil {
		tb.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("the proxy process's address: %v", err)
	}
	p.addr = strings.TrimSpace(line)
	return p
}

func (p *procProxy) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// status is a field of the process's /proc status in MiB (VmRSS, VmHWM).
func (p *procProxy) status(field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", p.cmd.Process.Pid, field)
}

// cpu is the process's CPU time so far, user and system.
func (p *procProxy) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's name, in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks (USER_HZ, 100 on
	// Linux).
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", p.cmd.Process.Pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", p.cmd.Process.Pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
