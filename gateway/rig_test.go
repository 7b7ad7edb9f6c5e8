package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/standin"
	"github.com/flockrun/flock/wire"
)

// Keys the stand-in expects, as the operator's key files hold them.
const (
	anthropicKey = "sk-ant-operator-0123456789"
	openaiKey    = "sk-operator-abcdef"
	geminiKey    = "AIza-operator-0123456789"
)

// portUIDs is the test's stand-in for sock_diag: each client connection
// is registered by its local port with the uid of the agent it plays.
type portUIDs struct {
	mu    sync.Mutex
	ports map[uint16]uint32
}

// UID waits a moment for the port: the server may accept before the
// client's dial has returned and registered it.
func (p *portUIDs) UID(local, _ netip.AddrPort) (uint32, error) {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		p.mu.Lock()
		uid, ok := p.ports[local.Port()]
		p.mu.Unlock()
		if ok {
			return uid, nil
		}
	}
	return 0, errors.New("no such socket")
}

// rig is a gateway on loopback in front of the stand-in (TLS, HTTP/2,
// its own CA), with two providers of it: anth (Anthropic's API) and oai
// (OpenAI's, base URL /v1).
type rig struct {
	t       testing.TB
	g       *Gateway
	up      *standin.Server
	upSrv   *httptest.Server
	addr    string
	srv     *http.Server
	uids    *portUIDs
	secrets map[string]Secret

	mu       sync.Mutex
	refused  []string
	crossed  []Refusal
	storeDir string
}

func newRig(t testing.TB, grants map[uint32]Agent) *rig {
	r := &rig{t: t, up: &standin.Server{AnthropicKey: anthropicKey, OpenAIKey: openaiKey, GeminiKey: geminiKey}, uids: &portUIDs{ports: map[uint16]uint32{}}}
	r.upSrv = httptest.NewUnstartedServer(r.up)
	r.upSrv.EnableHTTP2 = true
	r.upSrv.StartTLS()
	t.Cleanup(r.upSrv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.upSrv.Certificate().Raw})
	r.secrets = map[string]Secret{"anth": {Key: anthropicKey, CA: ca}, "oai": {Key: openaiKey, CA: ca}, "gem": {Key: geminiKey, CA: ca}}
	r.storeDir = t.TempDir()
	st, err := OpenStore(r.storeDir)
	if err != nil {
		t.Fatal(err)
	}
	r.g = &Gateway{UIDs: r.uids, Store: st, Logf: t.Logf,
		Refused: func(agent int, provider, reason string, status int, line string) {
			r.mu.Lock()
			r.refused = append(r.refused, line)
			r.mu.Unlock()
		},
		Crossed: func(ref Refusal) {
			r.mu.Lock()
			r.crossed = append(r.crossed, ref)
			r.mu.Unlock()
		}}
	if err := r.g.SetPolicy(r.policy(grants), r.secrets); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv = r.g.Server()
	go r.srv.Serve(ln)
	t.Cleanup(func() { Shutdown(r.srv, time.Second); st.Close() })
	return r
}

func (r *rig) policy(grants map[uint32]Agent) Policy {
	return Policy{
		Providers: map[string]spec.Provider{
			"anth": {Name: "anth", Kind: "anthropic", URL: r.upSrv.URL, KeyFile: "/etc/flock/keys/anth", CAFile: "/etc/flock/ca.pem"},
			"oai":  {Name: "oai", Kind: "openai", URL: r.upSrv.URL + "/v1", KeyFile: "/etc/flock/keys/oai", CAFile: "/etc/flock/ca.pem"},
			"gem":  {Name: "gem", Kind: "gemini", URL: r.upSrv.URL, KeyFile: "/etc/flock/keys/gem", CAFile: "/etc/flock/ca.pem"},
		},
		Agents: grants,
	}
}

// client is agent uid's HTTP client: every connection it opens is uid's.
func (r *rig) client(uid uint32) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, r.addr)
			if err == nil {
				r.uids.mu.Lock()
				r.uids.ports[c.LocalAddr().(*net.TCPAddr).AddrPort().Port()] = uid
				r.uids.mu.Unlock()
			}
			return c, err
		},
		MaxIdleConnsPerHost: 100,
	}}
}

// call sends body to the gateway's path as agent uid, with headers,
// and returns the status, the headers and the body.
func (r *rig) call(uid uint32, method, path string, body string, headers ...string) (int, http.Header, string) {
	r.t.Helper()
	req, err := http.NewRequest(method, "http://"+r.addr+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = nil, 0
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := r.client(uid).Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, string(b) + "\n[read error: " + err.Error() + "]"
	}
	return resp.StatusCode, resp.Header, string(b)
}

// usageOf is what flock counted of agent id's use of provider.
func (r *rig) usageOf(id int, provider string) wire.Tokens {
	return r.g.Store.Usage(id)[provider].Tokens
}

func reported(u standin.Usage) wire.Tokens {
	return wire.Tokens{InputTokens: u.Input, OutputTokens: u.Output, CacheReadTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite}
}

// errorMessage is error.message of a body in either API's format.
func errorMessage(t testing.TB, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" {
		t.Errorf("not an API error body: %q", body)
	}
	return e.Error.Message
}

const anthropicReq = `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"say three little words, then stop and say nothing more"}]}`
const anthropicStreamReq = `{"model":"claude-x","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"say three little words, then stop and say nothing more"}]}`
const openaiReq = `{"model":"gpt-x","messages":[{"role":"user","content":"say three little words please"}]}`
const openaiStreamReq = `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"say three little words please"}]}`

// countEvents is how many "data:" lines a stream had.
func countEvents(body string) int {
	return bytes.Count([]byte(body), []byte("\ndata:")) + map[bool]int{true: 1}[strings.HasPrefix(body, "data:")]
}

// eventually polls cond until it holds or 15 s pass: an answer is counted
// when the gateway reads its end, a moment after the client has it.
func eventually(t testing.TB, cond func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Error(err)
}

// sum adds a provider's counts to another's.
func sum(us ...wire.Tokens) wire.Tokens {
	var out wire.Tokens
	for _, u := range us {
		out.Add(u)
	}
	return out
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// burst sends four requests at once from each agent of grantsOf to the
// Messages API, half of them streams, each answer a hundred words (one
// event a millisecond); a stream let through is read for twenty events,
// then left. Each answer's status and what was read go to got. It
// returns once no scope holds a reservation any more.
func (r *rig) burst(grantsOf map[uint32]Agent, body func(stream bool) string, got func(uid uint32, status int, read string)) {
	r.t.Helper()
	var wg sync.WaitGroup
	for uid := range grantsOf {
		c := r.client(uid)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream := i%2 == 0
				req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/anth/v1/messages", strings.NewReader(body(stream)))
				req.Header.Set("X-Standin-Words", "100")
				req.Header.Set("X-Standin-Delay", "1ms")
				resp, err := c.Do(req)
				if err != nil {
					r.t.Error(err)
					return
				}
				var read strings.Builder
				if stream && resp.StatusCode == 200 {
					io.CopyN(&read, resp.Body, 2000) // twenty events' worth, then leave
				} else {
					io.Copy(&read, resp.Body)
				}
				resp.Body.Close()
				got(uid, resp.StatusCode, read.String())
			}()
		}
	}
	wg.Wait()
	eventually(r.t, func() error {
		r.g.limiter.mu.Lock()
		defer r.g.limiter.mu.Unlock()
		if len(r.g.limiter.reserved) != 0 {
			return errorf("%d scopes still hold reservations", len(r.g.limiter.reserved))
		}
		return nil
	})
}
