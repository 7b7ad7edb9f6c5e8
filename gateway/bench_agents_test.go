package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/benchrow"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/standin"
)

// BenchmarkModelGatewayAgents runs the real flock-proxy (flockctl proxy,
// built fresh) in front of the stand-in, and 100 agents calling it at
// once, each with its own uid (its sockets made with that fsuid, so the
// proxy's sock_diag tells them apart as it does agents): 100 requests
// each, 10,000 in all, half of them streams and half of those cut by the
// upstream mid-way at a random event. Rows: requests lost (answered other
// than the stand-in answered), the tokens counted (the proxy's counts on
// disk, read once it stopped) against the tokens the stand-in reported in
// the events that reached it, and the proxy's peak memory.
//
// Tier: root (100 uids' sockets).
func BenchmarkModelGatewayAgents(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("needs root: each agent's sockets are made as its own uid (setfsuid), as the kernel tells the proxy")
	}
	const agents, perAgent, uidBase = 100, 100, 3000000000
	up := &standin.Server{AnthropicKey: anthropicKey, OpenAIKey: openaiKey}
	upSrv, ca := standinTLS(b, up)
	bin := filepath.Join(harness.Build(b, nil, "./cmd/flockctl"), "flockctl")
	dir := b.TempDir()
	creds, state := filepath.Join(dir, "creds"), filepath.Join(dir, "state")
	os.MkdirAll(creds, 0o700)
	os.WriteFile(filepath.Join(creds, KeyCredential("anth")), []byte(anthropicKey), 0o600)
	os.WriteFile(filepath.Join(creds, CACredential("anth")), ca, 0o600)
	listen := freePort(b)
	type entry struct {
		UID    uint32          `json:"uid"`
		ID     int             `json:"id"`
		Egress []string        `json:"egress"`
		Models json.RawMessage `json:"models"`
	}
	providers, _ := spec.EncodeProviders([]spec.Provider{{Name: "anth", Kind: "anthropic", URL: upSrv.URL, KeyFile: "/etc/flock/keys/anth", CAFile: "/etc/flock/ca.pem"}})
	models, _ := spec.EncodeGrants([]spec.Grant{{Provider: "anth"}})
	cfg := map[string]any{"listen": listen, "providers": providers, "agents": []entry{}}
	for i := 1; i <= agents; i++ {
		cfg["agents"] = append(cfg["agents"].([]entry), entry{UID: uint32(uidBase + i), ID: i, Egress: []string{}, Models: models})
	}
	cb, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "proxy.json")
	os.WriteFile(cfgPath, cb, 0o644)
	cmd := exec.Command(bin, "proxy", "--config", cfgPath, "--state", state)
	cmd.Env = append(os.Environ(), "CREDENTIALS_DIRECTORY="+creds)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", listen); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("flockctl proxy did not listen on %s:\n%s", listen, logs.String())
		}
	}

	var lost, cut atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 1; i <= agents; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uid := uidBase + i
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2,
				DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return probe.DialAs(ctx, uid, addr) }}}
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for j := range perAgent {
				body, headers := anthropicReq, []string{"X-Standin-Tag", strconv.Itoa(i)}
				stream := j%2 == 1
				cutAt := 0
				if stream {
					body = anthropicStreamReq
					if rng.IntN(2) == 0 {
						cutAt = 1 + rng.IntN(9) // of the 10 events of a five-word answer
						headers = append(headers, "X-Standin-Cut", strconv.Itoa(cutAt))
					}
				}
				ok := call(c, "http://"+listen+"/anth/v1/messages", body, stream, headers...)
				switch {
				case cutAt > 0 && !ok:
					cut.Add(1)
				case !ok: // an answer the stand-in gave whole, not delivered whole
					lost.Add(1)
				}
			}
		}()
	}
	var peak atomic.Int64
	stopWatch := make(chan struct{})
	go func() { // the proxy's resident memory while it works
		for {
			if kb := statusKB(cmd.Process.Pid, "VmRSS"); kb > peak.Load() {
				peak.Store(kb)
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	took := time.Since(start)
	close(stopWatch)
	hwm := statusKB(cmd.Process.Pid, "VmHWM")
	// Stopped, it keeps its counts on disk: read them as the next start
	// would.
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	st, err := OpenStore(state)
	if err != nil {
		b.Fatal(err)
	}
	var counted, reported, requests uint64
	for i := 1; i <= agents; i++ {
		u := st.Usage(i)["anth"]
		rep := up.Reported(strconv.Itoa(i))
		requests += u.Requests
		counted += u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
		reported += rep.Tokens()
		// A stream cut before its usage counts at least the text that
		// passed (estimated), so output may be more than the upstream's
		// events had said; the rest is exact.
		if u.InputTokens != rep.Input || u.OutputTokens < rep.Output || u.CacheReadTokens != rep.CacheRead || u.CacheWriteTokens != rep.CacheWrite {
			b.Errorf("agent %d: counted %+v, the stand-in reported %+v", i, u, rep)
		}
	}
	st.Close()
	if requests != agents*perAgent || lost.Load() != 0 {
		b.Errorf("%d requests counted of %d, %d lost", requests, agents*perAgent, lost.Load())
	}
	b.Logf("%d requests of 100 agents at once in %v (%.0f/s), %d streams cut by the upstream; proxy RSS peak %d KiB (VmHWM %d KiB)",
		agents*perAgent, took.Round(time.Millisecond), float64(agents*perAgent)/took.Seconds(), cut.Load(), peak.Load(), hwm)
	note := fmt.Sprintf("the real flockctl proxy; 100 agents, each its own uid, 100 requests each at once; half streams, half of those cut mid-way by the upstream (%d here); the counts read from the proxy's disk after it stopped", cut.Load())
	for _, row := range []benchrow.Row{
		{What: "requests lost of 10,000 from 100 agents at once", N: agents, Unit: "requests", Flock: []float64{float64(lost.Load())}, Goal: "0"},
		{What: "tokens counted by flock, of 10,000 requests with streams cut", Floor: "tokens the stand-in reported", N: agents, Unit: "tokens",
			Flock: []float64{float64(counted)}, Base: []float64{float64(reported)}, Goal: "≥ (exact but cut streams' output, estimated)"},
		{What: "flock-proxy's peak RSS, 100 agents at once", N: agents, Unit: "MiB", Flock: []float64{float64(hwm) / 1024}, Goal: "≤ 64 MiB"},
		{What: "requests per second, 100 agents at once", N: agents, Unit: "req/s", Higher: true, Flock: []float64{float64(agents*perAgent) / took.Seconds()}},
	} {
		row.Group, row.Note = "models", note
		benchrow.Print(b, row)
	}
}

// call sends one request and reads its answer to the end: whether it
// came whole (a JSON answer, or a stream to its message_stop).
func call(c *http.Client, url, body string, stream bool, headers ...string) bool {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return false
	}
	if stream {
		return strings.Contains(string(b), "event: message_stop")
	}
	return json.Valid(b)
}

// statusKB reads a field in kB of /proc/pid/status (VmRSS, VmHWM).
func statusKB(pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
