package test

// Tier: root + VM (qemu). The model gateway's bounds on the bodies it
// holds (gateway.MaxBufferedPerAgent, gateway.ProxyMemoryLimit), proved
// where flock-proxy's cgroup holds: one agent sends its whole share of
// connections, each with a 32 MiB body, at once, while a bystander asks.
// Before the bounds, three such bodies at once took flock-proxy to
// 1.9 GiB. On that code (87ecdad) this test saw flock-proxy at 806 MiB
// resident (memory.peak 834 MiB), held at its MemoryHigh (memory.events
// high 8810) and answering none of the 16 nor the bystander within
// 120 s: it fails on the RSS bound and the statuses, and on a restart
// had the kernel killed it at MemoryMax (1G).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/standin"
)

const (
	// Agent 5 floods, agent 6 is the bystander; the neighbour stays.
	flooderID, bystanderID = 5, 6
	floodTunnels           = 16 // agent 5's shares.tunnels (the default, set here so the test says it)
	// Once: a round of 32 MiB bodies forwarded takes 9-25 s of the
	// emulated guest (the stand-in decodes them), and the subtest's
	// budget is about a minute.
	floodRounds = 1
	// quietFor is how long the bystander asks before the flood.
	quietFor = 8 * time.Second
	// floodRSSBound is the bound on flock-proxy's resident set:
	// the 64 MiB of one agent's bodies the gateway holds, under its Go
	// memory limit (gateway.ProxyMemoryLimit), under MemoryHigh (512M).
	floodRSSBound  = 256 << 20
	floodModelAddr = "127.0.0.1:11434" // the keyless stand-in (probe standin-serve ADDR -)
	floodScript    = hogDir + "/gateway-flood.py"
	floodDone      = "/tmp/gateway-flood.done"
)

// floodSpec is the neighbour, the flooder and the bystander, both granted
// the local provider; the hogs are gone (deprovisioned), so the VM is
// quiet but for what this test does.
var floodSpec = fmt.Sprintf(`providers:
  - {name: local, kind: openai, url: "http://%s/v1"}
agents:
  - id: %d
    heartbeat: 1s
  - id: %d
    models: {local: {}}
    shares: {tunnels: %d}
  - id: %d
    models: {local: {}}
`, floodModelAddr, neighbourID, flooderID, floodTunnels, bystanderID)

// gatewayFlood runs as an agent's uid (setpriv), with Python's standard
// library, which the image has (curl it has not).
//
//	flood N ROUNDS: ROUNDS times, N connections opened, then on each at
//	once a chat request of a 32 MiB JSON body (Expect: 100-continue, as
//	curl sends a large body: a body refused before it is read is never
//	sent, and the refusal is read whole); prints each answer.
//	bystander SECONDS STOPFILE: small chat requests, each on a new
//	connection, one every 0.1 s, until STOPFILE exists; prints
//	[start, seconds, status] of each.
const gatewayFlood = `import http.client, json, os, socket, sys, threading, time

ADDR = ("127.0.0.1", 4230)
PATH = "/local/chat/completions"

def small():
    body = b'{"model":"standin-1","messages":[{"role":"user","content":"hello"}]}'
    t0 = time.time()
    c = http.client.HTTPConnection(*ADDR, timeout=120)
    try:
        c.request("POST", PATH, body, {"Content-Type": "application/json", "X-Standin-Tag": "bystander"})
        r = c.getresponse()
        r.read()
        st = r.status
    except Exception as e:
        st = repr(e)
    finally:
        c.close()
    return [t0, time.time() - t0, st]

def bystander(seconds, stop):
    out, end = [], time.time() + seconds
    while time.time() < end and not os.path.exists(stop):
        out.append(small())
        time.sleep(0.1)
    json.dump(out, sys.stdout)

def head(s):
    # the status and length of the response head waiting in s, left unread
    while True:
        data = s.recv(65536, socket.MSG_PEEK)
        if not data:
            raise EOFError("closed before an answer")
        i = data.find(b"\r\n\r\n")
        if i >= 0:
            return int(data.split(b" ", 2)[1]), i + 4
        time.sleep(0.001)

def large(body, barrier, out):
    t0, sent, s = time.time(), False, None
    try:
        s = socket.create_connection(ADDR, timeout=120)
        barrier.wait()
        t0 = time.time()
        s.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:4230\r\nContent-Type: application/json\r\n"
                  b"X-Standin-Tag: flood\r\nConnection: close\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        st, n = head(s)
        if st == 100:
            while n > 0:
                n -= len(s.recv(n))
            s.sendall(body)
            sent = True
        r = http.client.HTTPResponse(s)
        r.begin()
        text = r.read()
        out.append({"start": t0, "secs": time.time() - t0, "status": r.status, "sent": sent, "body": text[:300].decode(errors="replace")})
    except Exception as e:
        out.append({"start": t0, "secs": time.time() - t0, "status": 0, "sent": sent, "body": repr(e)})
    finally:
        if s:
            s.close()

def flood(n, rounds):
    pre = b'{"model":"standin-1","messages":[{"role":"user","content":"'
    body = pre + b"a" * ((32 << 20) - 200) + b'"}]}'
    res = {"bytes": len(body), "rounds": []}
    res["start"] = time.time()
    for _ in range(rounds):
        out, barrier = [], threading.Barrier(n, timeout=60)
        ts = [threading.Thread(target=large, args=(body, barrier, out)) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        res["rounds"].append(out)
        time.sleep(0.5)  # each connection closed and its place in the share given back
    res["end"] = time.time()
    json.dump(res, sys.stdout)

if sys.argv[1] == "flood":
    flood(int(sys.argv[2]), int(sys.argv[3]))
else:
    bystander(float(sys.argv[2]), sys.argv[3])
`

// floodAnswer is one large request's answer.
type floodAnswer struct {
	Start  float64 `json:"start"`
	Secs   float64 `json:"secs"`
	Status int     `json:"status"`
	Sent   bool    `json:"sent"` // the body: sent after the gateway's 100 Continue
	Body   string  `json:"body"`
}

// checkGatewayFlood: agent 5 sends its whole share of connections, each
// with a 32 MiB body, at once; the gateway holds two of
// them (its part, 64 MiB), forwards them, and refuses the rest with a
// 429 before reading them. flock-proxy's resident set stays within
// 256 MiB, and it is neither killed nor restarted. Agent 6 asks all the
// while: every request answered; its latency during the flood against
// quiet is printed, never asserted.
func checkGatewayFlood(t *testing.T, v *harness.VM) {
	began := time.Now()
	if err := v.WriteFile(floodScript, []byte(gatewayFlood), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, v, "systemd-run", "--unit=flock-test-local-model", "--collect", probeBin, "standin-serve", floodModelAddr, "-")
	v.Eventually(t, 30*time.Second, func() error {
		_, err := floodLedger(t, v, "")
		return err
	})
	vmProvision(t, v, floodSpec)
	vmWaitActive(t, v, 2*time.Minute, neighbourID, flooderID, bystanderID)
	const unit = "flock-proxy.service"
	props := []string{"MainPID", "InvocationID", "NRestarts", "ControlGroup", "MemoryHigh", "MemoryMax"}
	before := vmProps(t, v, unit, props...)
	if before["MainPID"] == "0" || before["MainPID"] == "" {
		t.Fatalf("%s is not running: %v", unit, before)
	}
	hwmBefore := procStatusKB(t, v, before["MainPID"], "VmHWM")

	asAgent := func(id int) string {
		uid := strconv.Itoa(2000000000 + id)
		return "setpriv --reuid=" + uid + " --regid=" + uid + " --clear-groups python3 " + floodScript
	}
	var quiet, during [][3]any
	out := mustRun(t, v, "sh", "-c", asAgent(bystanderID)+fmt.Sprintf(" bystander %d /nonexistent", int(quietFor.Seconds())))
	if err := json.Unmarshal([]byte(out), &quiet); err != nil {
		t.Fatalf("the bystander, quiet: %v\n%s", err, out)
	}
	// The bystander asks from before the flood until after it; its
	// requests that started within the flood are the flood's.
	mustRun(t, v, "sh", "-c", fmt.Sprintf(`rm -f %[1]s
%[2]s bystander 240 %[1]s > /tmp/gateway-bystander.json & b=$!
sleep 1
%[3]s flood %[4]d %[5]d > /tmp/gateway-flood.json; f=$?
touch %[1]s; wait $b && exit $f`, floodDone, asAgent(bystanderID), asAgent(flooderID), floodTunnels, floodRounds))
	var fl struct {
		Bytes  int             `json:"bytes"`
		Start  float64         `json:"start"`
		End    float64         `json:"end"`
		Rounds [][]floodAnswer `json:"rounds"`
	}
	for path, into := range map[string]any{"/tmp/gateway-flood.json": &fl, "/tmp/gateway-bystander.json": &during} {
		b, err := v.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, into)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", path, err, b)
		}
	}
	after := vmProps(t, v, unit, props...)
	cg := "/sys/fs/cgroup" + after["ControlGroup"]
	peak, _, _ := run(t, v, "cat", cg+"/memory.peak")
	events, _, _ := run(t, v, "cat", cg+"/memory.events")
	memEvents := parseKV(events)
	flood := floodAnswersLedger(t, v)

	// No restart: the same process, the same start, no restart counted,
	// no OOM kill in its cgroup. (Before the bounds, the kernel killed it
	// at MemoryMax: its peak died with it.)
	var hwm uint64
	if after["MainPID"] != before["MainPID"] || after["InvocationID"] != before["InvocationID"] || after["NRestarts"] != "0" || before["NRestarts"] != "0" {
		t.Errorf("%s restarted during the flood: before %v, after %v; its journal:\n%s", unit, before, after,
			harness.TailLines(mustRun(t, v, "journalctl", "--no-pager", "-o", "cat", "-u", unit), 30))
	} else if hwm = procStatusKB(t, v, after["MainPID"], "VmHWM"); hwm<<10 > floodRSSBound {
		t.Errorf("%s's peak resident set (VmHWM) is %.1f MiB, above the bound %d MiB", unit, float64(hwm)/1024, floodRSSBound>>20)
	}
	if memEvents["oom_kill"] != 0 {
		t.Errorf("%s: memory.events oom_kill %d", unit, memEvents["oom_kill"])
	}

	// Statuses: some forwarded, the rest 429 naming the agent's part.
	// The gateway judges each before reading it, so of each round's
	// bodies at once it holds its part (two) and refuses the others.
	ok, over := 0, 0
	var okSecs, overSecs []float64
	for r, round := range fl.Rounds {
		rOK, rOver := 0, 0
		for _, a := range round {
			switch {
			case a.Status == 200:
				rOK++
				okSecs = append(okSecs, a.Secs)
			case a.Status == 429 && strings.Contains(a.Body, "over its part"):
				if a.Sent {
					t.Errorf("round %d: a 429 over its part after the body was read: %s", r+1, a.Body)
				}
				rOver++
				overSecs = append(overSecs, a.Secs)
			default:
				t.Errorf("round %d: a 32 MiB body answered %d, want 200 or a 429 naming its part: %s", r+1, a.Status, a.Body)
			}
		}
		if len(round) != floodTunnels || rOK < 2 || rOver == 0 {
			t.Errorf("round %d: %d answers, %d 200 and %d 429 over its part; want %d, at least 2 (its part: two bodies) and some refused", r+1, len(round), rOK, rOver, floodTunnels)
		}
		ok, over = ok+rOK, over+rOver
	}
	if len(fl.Rounds) != floodRounds {
		t.Errorf("%d rounds of the flood answered, want %d", len(fl.Rounds), floodRounds)
	}
	// The ones let through reached the model, whole.
	if flood.Requests != uint64(ok) {
		t.Errorf("the stand-in answered %d flood requests, the flooder saw %d 200s", flood.Requests, ok)
	}

	// The bystander: every request answered, during the flood as in quiet.
	// Its first request of each run is left out of the latencies: it
	// finds no connection to the stand-in in the gateway's pool yet.
	var quietMS, duringMS []float64
	for i, samples := range [][][3]any{quiet, during} {
		for j, s := range samples {
			start, _ := s[0].(float64)
			secs, _ := s[1].(float64)
			if st, _ := s[2].(float64); st != 200 {
				t.Errorf("the bystander's request at %.3f answered %v, want 200", start, s[2])
			}
			if j == 0 {
				continue
			}
			if i == 0 {
				quietMS = append(quietMS, secs*1000)
			} else if start >= fl.Start && start <= fl.End {
				duringMS = append(duringMS, secs*1000)
			}
		}
	}
	if len(quietMS) == 0 || len(duringMS) == 0 {
		t.Errorf("the bystander asked %d times in quiet and %d during the flood, want some of each", len(quietMS), len(duringMS))
	}

	mib := func(kb uint64) float64 { return float64(kb) / 1024 }
	peakMiB := "n/a"
	if n, err := strconv.ParseUint(strings.TrimSpace(peak), 10, 64); err == nil {
		peakMiB = fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	q50, q99, d50, d99 := percentile(quietMS, 50), percentile(quietMS, 99), percentile(duringMS, 50), percentile(duringMS, 99)
	t.Logf("FIGURE gateway flood: agent %d, %d round(s) of its whole share (%d connections) at once, each a %.1f MiB body: %d answered 200 (forwarded, the stand-in saw %d; each in %.1f-%.1f s), %d 429 over its part (each within %.0f ms, its body never sent), in %.1f s",
		flooderID, floodRounds, floodTunnels, float64(fl.Bytes)/(1<<20), ok, flood.Requests, percentile(okSecs, 0), percentile(okSecs, 100),
		over, 1000*percentile(overSecs, 100), fl.End-fl.Start)
	t.Logf("FIGURE gateway flood: %s peak RSS (VmHWM) %.1f MiB (%.1f before the flood; bound %d MiB), cgroup memory.peak %s, memory.events high %d max %d oom_kill %d (MemoryHigh %s, MemoryMax %s); MainPID %s -> %s, NRestarts %s -> %s",
		unit, mib(hwm), mib(hwmBefore), floodRSSBound>>20, peakMiB, memEvents["high"], memEvents["max"], memEvents["oom_kill"], after["MemoryHigh"], after["MemoryMax"],
		before["MainPID"], after["MainPID"], before["NRestarts"], after["NRestarts"])
	t.Logf("FIGURE gateway flood: bystander (agent %d) latency quiet p50 %.1f ms p99 %.1f ms (%d requests), during the flood p50 %.1f ms p99 %.1f ms (%d requests): ratio p50 %.2fx p99 %.2fx (the issue's aim: p99 within 2x; never asserted)",
		bystanderID, q50, q99, len(quietMS), d50, d99, len(duringMS), ratio(d50, q50), ratio(d99, q99))
	t.Logf("FIGURE gateway flood: subtest took %v", time.Since(began).Round(100*time.Millisecond))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// procStatusKB is field (VmHWM, VmRSS, ...) of /proc/PID/status, in kB.
func procStatusKB(t *testing.T, v *harness.VM, pid, field string) uint64 {
	t.Helper()
	out := mustRun(t, v, "cat", "/proc/"+pid+"/status")
	for _, l := range strings.Split(out, "\n") {
		if k, rest, ok := strings.Cut(l, ":"); ok && k == field {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%s/status %s: %q", pid, field, rest)
			}
			return n
		}
	}
	t.Fatalf("/proc/%s/status has no %s:\n%s", pid, field, out)
	return 0
}

// parseKV is a cgroup file of "key value" lines.
func parseKV(out string) map[string]uint64 {
	m := map[string]uint64{}
	for _, l := range strings.Split(out, "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(l), " "); ok {
			m[k], _ = strconv.ParseUint(val, 10, 64)
		}
	}
	return m
}

// floodLedger is the keyless stand-in's ledger for tag, read as root
// (the stand-in is out of the agents' reach).
func floodLedger(t *testing.T, v *harness.VM, tag string) (standin.Usage, error) {
	t.Helper()
	var u standin.Usage
	out, errOut, err := run(t, v, "python3", "-c", "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())",
		"http://"+floodModelAddr+"/standin/ledger?tag="+tag)
	if err != nil {
		return u, fmt.Errorf("the stand-in's ledger: %v\n%s", err, errOut)
	}
	return u, json.Unmarshal([]byte(out), &u)
}

func floodAnswersLedger(t *testing.T, v *harness.VM) standin.Usage {
	t.Helper()
	u, err := floodLedger(t, v, "flood")
	if err != nil {
		t.Fatal(err)
	}
	return u
}
