package gateway

// Tier: unit. The attacks of a hostile agent on the gateway, each against
// the gateway on loopback in front of the stand-in: bodies its parser was
// not written for, limits outrun by requests at once, streams closed
// before their usage, bodies that would fill flock-proxy's memory.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
)

// A body the gateway cannot read exactly as every server would is
// refused with a 400 that names the problem, before anything is sent.
func TestGatewayRefusesWhatItCannotRead(t *testing.T) {
	r := newRig(t, grants(both(), nil))
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		want             string
	}{
		{"an array", "/anth/v1/messages", `[{"model":"x"}]`, nil, "JSON but not an object"},
		{"two documents", "/oai/chat/completions", `{"model":"x"} {"stream":true}`, nil, "not one JSON document"},
		{"not JSON", "/oai/embeddings", `model=x`, nil, "not one JSON document"},
		{"no body", "/anth/v1/messages", ``, nil, "not one JSON document"},
		{"a key twice", "/oai/chat/completions", `{"model":"x","stream":false,"stream":true}`, nil, `the key "stream" is in the request body twice`},
		{"a key twice in other case", "/oai/chat/completions", `{"model":"x","stream":false,"Stream":true}`, nil, `the key "Stream" is in the request body twice`},
		{"a key twice, escaped", "/anth/v1/messages", `{"model":"x","max_tokens":1,"max_tok\u0065ns":100000}`, nil, `is in the request body twice`},
		{"a key twice, folded", "/oai/responses", `{"model":"x","background":false,"bac\u212aground":true}`, nil, `is in the request body twice`},
		{"a key twice in stream_options", "/oai/chat/completions", `{"stream":true,"stream_options":{"include_usage":true,"include_usage":false}}`, nil, `the key stream_options."include_usage" is in the request body twice`},
		{"stream as a string", "/oai/chat/completions", `{"model":"x","stream":"true"}`, nil, `stream is "true"; it must be true or false`},
		{"stream as a number", "/anth/v1/messages", `{"model":"x","max_tokens":5,"stream":1}`, nil, `stream is 1; it must be true or false`},
		{"background as a string", "/oai/responses", `{"model":"x","background":"true"}`, nil, `background is "true"; it must be true or false`},
		{"max_tokens as a string", "/anth/v1/messages", `{"model":"x","max_tokens":"100"}`, nil, `max_tokens is "100"; it must be a whole number`},
		{"max_tokens negative", "/oai/chat/completions", `{"model":"x","max_tokens":-1}`, nil, `max_tokens is -1; it must be a whole number`},
		{"n past its bound", "/oai/chat/completions", `{"model":"x","n":1000}`, nil, `n is 1000; it must be a whole number from 0 to 128`},
		{"stream_options not an object", "/oai/chat/completions", `{"model":"x","stream":true,"stream_options":"x"}`, nil, `stream_options is not an object`},
		{"a gzip body", "/anth/v1/messages", anthropicReq, []string{"Content-Encoding", "gzip"}, `the request body is encoded (Content-Encoding: "gzip")`},
		{"a dot segment", "/anth/v1/./messages", anthropicReq, nil, `has a "." segment`},
		{"a dot-dot segment", "/anth/v1/messages/../messages", anthropicReq, nil, `has a ".." segment`},
		{"an escaped dot-dot", "/oai/%2e%2e/v1/chat/completions", openaiReq, nil, `has a ".." segment`},
		{"an empty segment", "/anth/v1//messages", anthropicReq, nil, `has an empty segment`},
		{"a maximum written otherwise", "/anth/v1/messages", `{"model":"x","MAX_TOKENS":1}`, nil, `the key "max_tokens" is written "MAX_TOKENS"; write it "max_tokens"`},
		{"stream written otherwise", "/oai/chat/completions", `{"model":"x","Stream":true}`, nil, `the key "stream" is written "Stream"`},
		{"tools written otherwise", "/oai/responses", `{"model":"x","Tools":[{"type":"function"}]}`, nil, `the key "tools" is written "Tools"`},
		{"include_usage written otherwise", "/oai/chat/completions", `{"model":"x","stream":true,"stream_options":{"Include_Usage":false}}`, nil, `the key "include_usage" is written "Include_Usage"`},
	} {
		status, h, body := r.call(uidA, http.MethodPost, tc.path, tc.body, tc.headers...)
		msg := errorMessage(t, body)
		if status != 400 || h.Get("X-Flock-Proxy") != "refused" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %s; want a 400 saying %q", tc.name, status, body, tc.want)
		}
	}
	if seen := r.up.Seen(); len(seen) != 0 {
		t.Errorf("refused requests reached the upstream: %v", seen)
	}
}

// rawRequest sends a request's head as agent uid on a connection of its
// own, with a Content-Length and the first part of its body only, and
// returns the connection (its body never finishes unless the test writes
// it).
func (r *rig) rawRequest(uid uint32, path string, length int, first string) net.Conn {
	r.t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	r.uids.mu.Lock()
	r.uids.ports[c.LocalAddr().(*net.TCPAddr).AddrPort().Port()] = uid
	r.uids.mu.Unlock()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: flock\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, length, first)
	return c
}

// answer reads the response on c, within 5 s.
func answer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A request over a limit is refused from its headers: the gateway does
// not wait for (or read) a body it would refuse anyway.
func TestGatewayJudgesLimitsBeforeTheBody(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"oai": {Provider: "oai", Concurrent: 1}}, nil))
	held := r.rawRequest(uidA, "/oai/chat/completions", MaxRequestBody, `{"model":"x",`) // under way, its body coming
	eventually(t, func() error {
		r.g.limiter.mu.Lock()
		defer r.g.limiter.mu.Unlock()
		if n := r.g.limiter.inflight[key{idA, "oai"}]; n != 1 {
			return errorf("%d under way", n)
		}
		return nil
	})
	c := r.rawRequest(uidA, "/oai/chat/completions", MaxRequestBody, "")
	status, body := answer(t, c)
	if status != 429 || !strings.Contains(body, "over its limit concurrent=1") {
		t.Errorf("a second request over concurrent=1: %d %s", status, body)
	}
	if n := r.g.buffers.held(); n != MaxRequestBody {
		t.Errorf("the gateway holds %d bytes of bodies, want the first's %d", n, MaxRequestBody)
	}
	held.Close()
	eventually(t, func() error {
		if n := r.g.buffers.held(); n != 0 {
			return errorf("%d bytes still held after the client left", n)
		}
		return nil
	})
}

// One agent sending many large bodies at once holds no more than its part
// of what the gateway buffers, the gateway no more than its bound; a
// bystander's request goes through meanwhile, and everything held is
// given back.
func TestGatewayBoundsTheBodiesItHolds(t *testing.T) {
	r := newRig(t, grants(both(), both()))
	const size = 3 << 20
	r.g.buffers.maxPerAgent, r.g.buffers.max = 2*size, 3*size
	var flood []net.Conn
	for range 2 {
		flood = append(flood, r.rawRequest(uidA, "/anth/v1/messages", size, `{"model":"x",`))
	}
	eventually(t, func() error {
		if n := r.g.buffers.held(); n != 2*size {
			return errorf("%d held, want %d", n, 2*size)
		}
		return nil
	})
	status, body := answer(t, r.rawRequest(uidA, "/anth/v1/messages", size, ""))
	if status != 429 || !strings.Contains(body, "over its part (6 MiB)") {
		t.Errorf("a third large body of the same agent: %d %s", status, body)
	}
	status, body = answer(t, r.rawRequest(uidB, "/anth/v1/messages", 2*size, ""))
	if status != 503 || !strings.Contains(body, "over its bound (9 MiB)") {
		t.Errorf("a body over the gateway's bound: %d %s", status, body)
	}
	if status, _, body := r.call(uidB, http.MethodPost, "/anth/v1/messages", anthropicReq); status != 200 {
		t.Errorf("the bystander's small request: %d %s", status, body)
	}
	// The flood's bodies arrive whole: each is judged and sent, and what
	// it held is given back.
	for _, c := range flood {
		rest := `"max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("a", size-len(`{"model":"x",`)-len(`"max_tokens":5,"messages":[{"role":"user","content":"`)-len(`"}]}`)) + `"}]}`
		if _, err := io.WriteString(c, rest); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range flood {
		if status, body := answer(t, c); status != 200 {
			t.Errorf("a large body sent whole: %d %.300s", status, body)
		}
	}
	eventually(t, func() error {
		if n := r.g.buffers.held(); n != 0 {
			return errorf("%d bytes still held", n)
		}
		return nil
	})
}

// Requests at once cannot spend past a token limit: each reserves its
// most before it goes, streams closed by the client before their usage
// are counted at least as what they received, and each agent's day ends
// at or under its limit. A hundred agents, four requests each at once,
// half of them streams cut after twenty events.
func TestGatewayTokenLimitIsACeiling(t *testing.T) {
	const limit, agents = 300, 100
	grantsOf := map[uint32]Agent{}
	for i := range agents {
		grantsOf[uint32(3000000000+i)] = Agent{ID: 100 + i, Grants: map[string]spec.Grant{"anth": {Provider: "anth", TokensPerDay: limit}}}
	}
	r := newRig(t, grantsOf)
	req := func(stream bool) string {
		return fmt.Sprintf(`{"model":"claude-x","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"write"}]}`, stream)
	}
	var mu sync.Mutex
	statuses := map[int]int{}
	received := map[int]uint64{} // words the agent's clients read, by agent
	r.burst(grantsOf, req, func(uid uint32, status int, read string) {
		mu.Lock()
		defer mu.Unlock()
		statuses[status]++
		received[grantsOf[uid].ID] += uint64(strings.Count(read, "word"))
	})
	over, most, est := 0, uint64(0), uint64(0)
	for _, a := range grantsOf {
		u := r.g.Store.Usage(a.ID)["anth"]
		most, est = max(most, u.DayTokens), est+u.EstimatedRequests
		if u.DayTokens > limit {
			over++
		}
		if u.OutputTokens < received[a.ID] {
			t.Errorf("agent %d: %d output tokens counted, its clients received %d words", a.ID, u.OutputTokens, received[a.ID])
		}
	}
	t.Logf("%d agents, 4 requests each at once: statuses %v; the most an agent spent %d of %d; %d estimated", agents, statuses, most, limit, est)
	if over > 0 {
		t.Errorf("%d agents spent past their tokens_per_day of %d (the most: %d)", over, limit, most)
	}
	if statuses[429] == 0 || statuses[200] == 0 || est == 0 {
		t.Errorf("statuses %v, %d estimated: want some let through, some refused, some cut", statuses, est)
	}
}

// A stream the client closes after the text it wanted, before the usage
// at its end, is counted at least as what it received: never the one
// output token of Anthropic's message_start.
func TestGatewayCountsStreamsTheClientCloses(t *testing.T) {
	r := newRig(t, grants(both(), nil))
	for _, tc := range []struct{ path, body string }{{"/anth/v1/messages", anthropicStreamReq}, {"/oai/chat/completions", openaiStreamReq}} {
		httpReq, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+tc.path, strings.NewReader(tc.body))
		httpReq.Header.Set("X-Standin-Words", "400")
		httpReq.Header.Set("X-Standin-Delay", "1ms")
		resp, err := r.client(uidA).Do(httpReq)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		words := 0
		for words < 20 {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			words += strings.Count(line, "word")
		}
		resp.Body.Close()
		provider := strings.Split(tc.path, "/")[1]
		eventually(t, func() error {
			u := r.g.Store.Usage(idA)[provider]
			if u.Requests != 1 || u.OutputTokens < uint64(words) || u.EstimatedRequests != 1 || u.Errors[ErrorCut] != 1 {
				return errorf("%s: closed after %d words: counted %+v", tc.path, words, u)
			}
			return nil
		})
	}
}

// A proxy stopped while a stream is under way (a restart to replace a
// key) lets it run a moment, then cuts it and counts it as what passed,
// before the store closes: nothing is left for the next start to count
// at its reservation.
func TestGatewayCountsWhatIsUnderWayAtAStop(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth", TokensPerDay: 100000}}, nil))
	httpReq, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/anth/v1/messages", strings.NewReader(anthropicStreamReq))
	httpReq.Header.Set("X-Standin-Words", "100")
	httpReq.Header.Set("X-Standin-Delay", "20ms")
	resp, err := r.client(uidA).Do(httpReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for words := 0; words < 5; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		words += strings.Count(line, "word")
	}
	Shutdown(r.srv, 100*time.Millisecond)
	if !r.g.Drain(5 * time.Second) {
		t.Fatal("the request under way did not end")
	}
	u := r.g.Store.Usage(idA)["anth"]
	if u.Requests != 1 || u.Errors[ErrorCut] != 1 || u.EstimatedRequests != 1 || u.OutputTokens < 5 || u.OutputTokens >= 100 {
		t.Errorf("the stream under way at the stop: %+v; want it counted as cut, estimated from what passed", u)
	}
	r.g.Store.mu.Lock()
	open := len(r.g.Store.begun)
	r.g.Store.mu.Unlock()
	if open != 0 {
		t.Errorf("%d requests left begun in the log", open)
	}
}

// A client that resets its socket in the middle of its body leaves
// nothing behind: the bytes held for it are given back, its place under
// concurrent is free, and nothing reached the provider.
func TestGatewayClientResetMidBody(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth", Concurrent: 1}}, nil))
	c := r.rawRequest(uidA, "/anth/v1/messages", 8<<20, `{"model":"x","max_tokens":5,"messages":[{"role":"user","content":"`+strings.Repeat("a", 1<<20))
	eventually(t, func() error {
		if n := r.g.buffers.held(); n != 8<<20 {
			return errorf("%d held", n)
		}
		return nil
	})
	c.(*net.TCPConn).SetLinger(0)
	c.Close() // a reset, mid-body
	eventually(t, func() error {
		r.g.limiter.mu.Lock()
		n := r.g.limiter.inflight[key{idA, "anth"}]
		r.g.limiter.mu.Unlock()
		if held := r.g.buffers.held(); held != 0 || n != 0 {
			return errorf("after the reset: %d bytes held, %d under way", held, n)
		}
		return nil
	})
	if seen := r.up.Seen(); len(seen) != 0 {
		t.Errorf("a body cut by a reset reached the provider: %v", seen)
	}
	if status, _, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", anthropicReq); status != 200 {
		t.Errorf("the next request: %d %s", status, body)
	}
}
