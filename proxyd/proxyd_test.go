package proxyd

// Tier: unit (loopback only: the proxy asks the kernel who owns each
// client's socket, as in production; the provider is the stand-in, the
// bus an in-process one).

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/standin"
	"github.com/flockrun/flock/wire"
)

const key = "sk-ant-operator-0123456789"

const request = `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"say three little words, then stop and say nothing more"}]}`

// rig is what flock-proxy.service is given: a config, the provider's key
// and CA as credentials, the proxy's bus seed, a state directory; with
// the provider (the stand-in, TLS) and the bus (the operator listening to
// everything the proxy publishes) it reaches.
type rig struct {
	t        *testing.T
	o        Options
	worker   string // agent 1's bus seed file
	upstream *httptest.Server
	uid      uint32 // the test's: the agent the kernel names
	busURL   string
	op       *nats.Conn // the operator's connection
	reports  chan wire.ModelReport
	egress   chan wire.EgressEvent
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, uid: uint32(os.Getuid()), reports: make(chan wire.ModelReport, 100), egress: make(chan wire.EgressEvent, 100)}
	r.upstream = httptest.NewUnstartedServer(&standin.Server{AnthropicKey: key})
	r.upstream.EnableHTTP2 = true
	r.upstream.StartTLS()
	t.Cleanup(r.upstream.Close)

	dir := t.TempDir()
	r.o = Options{ConfigPath: filepath.Join(dir, "proxy.json"), StateDir: t.TempDir(), Nkey: filepath.Join(dir, "proxy.seed"), CredentialsDir: t.TempDir()}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.upstream.Certificate().Raw})
	r.write(filepath.Join(r.o.CredentialsDir, gateway.KeyCredential("anth")), []byte(key+"\n"))
	r.write(filepath.Join(r.o.CredentialsDir, gateway.CACredential("anth")), ca)

	// The bus with the proxy's user and the operator's, as provision
	// writes it.
	pub := map[string]string{}
	seeds := map[string]nkeys.KeyPair{}
	for _, n := range []string{creds.ProxyName, creds.OperatorName, spec.UserName(1)} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seeds[n], pub[n] = kp, must(kp.PublicKey())
	}
	r.write(r.o.Nkey, must(seeds[creds.ProxyName].Seed()))
	r.worker = filepath.Join(dir, "agent-1.seed")
	r.write(r.worker, must(seeds[spec.UserName(1)].Seed()))
	// Agent 1, a worker: the bus lists it and keeps its consumer.
	flock := &spec.Flock{Bus: spec.Bus{Host: "127.0.0.1", Port: -1}, Agents: []spec.Agent{{ID: 1, Role: spec.RoleWorker, Models: []spec.Grant{{Provider: "anth"}}}}}
	b, err := bus.Start(bus.ForFlock(flock, pub), bus.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	r.busURL = b.ClientURL()
	op := seeds[creds.OperatorName]
	nc, err := nats.Connect(r.busURL, nats.Nkey(must(op.PublicKey()), op.Sign))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r.op = nc
	for subject, decode := range map[string]func([]byte){
		wire.UsageSubjects: func(b []byte) {
			if rep, err := wire.ParseModelReport(b); err == nil {
				r.reports <- rep
			}
		},
		wire.EgressSubjects: func(b []byte) {
			if e, err := wire.ParseEgress(b); err == nil {
				r.egress <- e
			}
		},
	} {
		if _, err := nc.Subscribe(subject, func(m *nats.Msg) { decode(m.Data) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (r *rig) write(path string, b []byte) {
	r.t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// config writes the proxy's config: the test's uid is agent 1, granted
// provider anth (the stand-in) when granted.
func (r *rig) config(listen string, granted bool) {
	r.t.Helper()
	c := proxy.Config{Listen: listen, Bus: r.busURL,
		Policy: proxy.Policy{Agents: map[uint32]proxy.AgentRules{r.uid: {ID: 1}}},
		Gateway: gateway.Policy{Providers: map[string]spec.Provider{
			"anth": {Name: "anth", Kind: "anthropic", URL: r.upstream.URL, KeyFile: "/etc/flock/keys/anth", CAFile: "/etc/flock/ca.pem"},
		}, Agents: map[uint32]gateway.Agent{}}}
	if granted {
		c.Gateway.Agents[r.uid] = gateway.Agent{ID: 1, Grants: map[string]spec.Grant{"anth": {Provider: "anth"}}, Worker: true}
	}
	b, err := c.Encode()
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(r.o.ConfigPath, b)
}

// call sends the request to the gateway on s as the test's uid.
func (r *rig) call(s *Service) (int, string) {
	r.t.Helper()
	resp, err := http.Post(fmt.Sprintf("http://%s/anth/v1/messages", s.Addr()), "application/json", strings.NewReader(request))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// report waits for a report of agent 1 that cond accepts.
func (r *rig) report(what string, cond func(wire.ModelReport) bool) {
	r.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case rep := <-r.reports:
			if rep.Agent == 1 && cond(rep) {
				return
			}
		case <-deadline:
			r.t.Fatalf("no report on the bus of %s", what)
		}
	}
}

// The service serves a granted request through the gateway to the
// provider and publishes the count; a reload takes the grant away (the
// next request refused, the refusal on the bus as a decision) and refuses
// a new address, naming the restart; Close stops it with the count kept.
func TestServiceServesReloadsPublishesAndStops(t *testing.T) {
	r := newRig(t)
	r.config("127.0.0.1:0", true)
	s, err := Start(r.o)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := r.call(s); status != http.StatusOK || !strings.Contains(body, `"type":"message"`) {
		t.Fatalf("a granted request: %d %s", status, body)
	}
	r.report("the request counted", func(rep wire.ModelReport) bool { return rep.Usage["anth"].Requests == 1 })

	r.config("127.0.0.1:0", false)
	if err := s.Reload(); err != nil {
		t.Fatalf("reloading without the grant: %v", err)
	}
	if status, body := r.call(s); status != http.StatusForbidden {
		t.Errorf("a request after its grant was taken away: %d %s", status, body)
	}
	select {
	case e := <-r.egress:
		if e.Decision != "deny" || e.Reason != gateway.ReasonNotAgent || e.Name != "model:anth" {
			t.Errorf("the refusal on the bus: %+v", e)
		}
	case <-time.After(15 * time.Second):
		t.Error("no decision on the bus of the refusal")
	}

	r.config("127.0.0.1:1", true)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "systemctl restart flock-proxy.service") {
		t.Errorf("reloading with a new address: %v, want the restart named", err)
	}

	addr := s.Addr().String()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := http.Post("http://"+addr+"/anth/v1/messages", "application/json", strings.NewReader(request)); err == nil {
		t.Error("the gateway still answers after Close")
	}
	st, err := gateway.OpenStore(r.o.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := st.Usage(1)["anth"].Requests; got != 1 {
		t.Errorf("the counts on disk after Close: %d requests, want 1", got)
	}
}
