package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// UIDOf says which uid owns the TCP socket local -> remote (the proxy's
// SockDiag; a fake in tests).
type UIDOf interface {
	UID(local, remote netip.AddrPort) (uint32, error)
}

// Bounds of what one request may bring.
const (
	// MaxRequestBody is the largest request body carried: Anthropic's
	// own limit for the Messages API (32 MB); beyond it, 413.
	MaxRequestBody = 32 << 20
)

// Gateway serves the model APIs of a Policy. Set the policy (SetPolicy)
// before serving; a new one applies to requests that arrive after it.
type Gateway struct {
	UIDs  UIDOf
	Store *Store
	Now   func() time.Time // nil: time.Now
	// Refused is told each request flock answered itself (no grant, a
	// limit, too large, the provider unreachable); Crossed, the first
	// refusal of a limit since the agent was last let through (the
	// event). Either may be nil.
	Refused func(agent int, provider, reason string, status int, line string)
	Crossed func(Refusal)
	// Logf reports the gateway's own troubles (a count not written).
	Logf func(format string, args ...any)
	// Leases says which tasks a worker holds, for its requests to be
	// charged to them (nil: none are).
	Leases Leases

	state    atomic.Pointer[state]
	limiter  limiter
	flights  flights
	buffers  buffers
	handlers sync.WaitGroup // the requests under way (Drain)
}

// state is a policy with its upstreams, its prices and each agent's
// budgets, swapped whole.
type state struct {
	policy    Policy
	upstreams map[string]*upstream
	prices    modelapi.Prices
	budgets   map[int][]spec.Budget // by agent id
	ids       map[int]bool          // the agents of policy.Agents, by id
}

func (g *Gateway) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *Gateway) logf(format string, args ...any) {
	if g.Logf != nil {
		g.Logf(format, args...)
	}
}

// SetPolicy makes p the policy of requests from now on, with each
// provider's key and CA (secrets). A provider whose URL, key and CA are
// the same keeps its connections.
func (g *Gateway) SetPolicy(p Policy, secrets map[string]Secret) error {
	old := g.state.Load()
	st := &state{policy: p, upstreams: map[string]*upstream{}}
	for name, pr := range p.Providers {
		sec := secrets[name]
		if pr.KeyFile != "" && sec.Key == "" {
			return fmt.Errorf("provider %s: no key (credential %s)", name, KeyCredential(name))
		}
		if old != nil {
			if u := old.upstreams[name]; u != nil && u.same(pr, sec) {
				st.upstreams[name] = u
				continue
			}
		}
		u, err := newUpstream(g, pr, sec)
		if err != nil {
			return err
		}
		st.upstreams[name] = u
	}
	st.prices = modelapi.Shipped()
	for name, pr := range p.Providers {
		if len(pr.Prices) > 0 {
			st.prices = st.prices.With(name, pr.Prices)
		}
	}
	st.ids = map[int]bool{}
	for _, a := range p.Agents {
		st.ids[a.ID] = true
	}
	st.budgets = map[int][]spec.Budget{}
	for _, b := range p.Budgets {
		for _, a := range b.Agents {
			st.budgets[a] = append(st.budgets[a], b)
		}
	}
	if g.Store != nil {
		g.Store.SetGroups(p.groups(), g.now())
	}
	g.state.Store(st)
	if old != nil {
		for name, u := range old.upstreams {
			if st.upstreams[name] != u {
				u.tr.CloseIdleConnections()
			}
		}
	}
	return nil
}

// Policy is the policy in force.
func (g *Gateway) Policy() Policy {
	if st := g.state.Load(); st != nil {
		return st.policy
	}
	return Policy{}
}

type ctxKey struct{}

// peer is who a connection is, as ConnContext found it.
type peer struct {
	uid uint32
	err error
}

// ConnContext is the http.Server's: it asks the kernel once per
// connection which uid owns the client's socket.
func (g *Gateway) ConnContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{}
	if o, ok := c.(Owned); ok {
		p.uid = o.OwnerUID()
	} else {
		// The client's socket is the remote end, seen from its side.
		p.uid, p.err = g.UIDs.UID(addrPort(c.RemoteAddr()), addrPort(c.LocalAddr()))
	}
	return context.WithValue(ctx, ctxKey{}, p)
}

// Owned is a connection whose socket's uid its listener already asked
// the kernel for (flock-proxy's, for a connection it holds a share for).
type Owned interface{ OwnerUID() uint32 }

func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	return netip.AddrPort{}
}

// ServeHTTP takes one request of an agent: who, which provider, whether
// its grant and limits let it, then the provider's answer, metered.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.handlers.Add(1)
	defer g.handlers.Done()
	start := g.now()
	st := g.state.Load()
	if st == nil {
		st = &state{}
	}
	if r.ContentLength != 0 {
		// Until its body is read, a refusal closes the connection: the
		// server would otherwise read what is left of a body refused
		// before it was read, which is work (and a wait) the gateway
		// refuses to do for a request it does not take.
		w.Header().Set("Connection", "close")
	}
	p, ok := r.Context().Value(ctxKey{}).(peer)
	if !ok || p.err != nil {
		g.refuse(w, 0, "", nil, ReasonNotAgent, http.StatusForbidden, "flock proxy: refused: the kernel could not say who owns this connection; only flock agents may call the model gateway", 0)
		return
	}
	name, rest := splitProvider(r.URL.Path)
	a, ok := st.policy.Agents[p.uid]
	if !ok {
		g.refuse(w, 0, name, nil, ReasonNotAgent, http.StatusForbidden, fmt.Sprintf("flock proxy: refused: uid %d is not a flock agent granted a model API (an agent's models: in the spec)", p.uid), 0)
		return
	}
	up, known := st.upstreams[name]
	grant, granted := a.Grants[name]
	switch {
	case !known && !granted:
		g.refuse(w, a.ID, name, nil, ReasonNoProvider, http.StatusNotFound, fmt.Sprintf("flock proxy: agent %d: no provider %q here; %s", a.ID, name, grantsLine(a)), 0)
		return
	case !granted:
		g.refuse(w, a.ID, name, up.kind, ReasonNoGrant, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d is not granted provider %s; add %s to agents[id=%d].models in the spec (%s)", a.ID, name, name, a.ID, grantsLine(a)), 0)
		return
	case !known:
		// Granted, but its provider did not load: the proxy's config is
		// behind the spec.
		g.refuse(w, a.ID, name, nil, ReasonNoProvider, http.StatusBadGateway, fmt.Sprintf("flock proxy: agent %d: provider %s is not loaded; run flockctl provision", a.ID, name), 0)
		return
	}
	kind := up.kind
	if problem := modelapi.PathProblem(rest); problem != "" {
		g.refuse(w, a.ID, name, kind, ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("flock proxy: agent %d: %s", a.ID, problem), 0)
		return
	}
	ep, ok := kind.Endpoint(r.Method, rest)
	if !ok {
		g.refuse(w, a.ID, name, kind, ReasonNoEndpoint, http.StatusNotFound, fmt.Sprintf("flock proxy: agent %d: %s %s is not an endpoint the model gateway carries for provider %s (only what it can meter: %s)", a.ID, r.Method, quoted(rest), name, kind.EndpointList()), 0)
		return
	}
	if kind.Query != nil {
		if err := kind.Query(r.URL.Query(), ep); err != nil {
			g.refuse(w, a.ID, name, kind, ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("flock proxy: agent %d: %v", a.ID, err), 0)
			return
		}
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" {
		g.refuse(w, a.ID, name, kind, ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("flock proxy: agent %d: the request body is encoded (Content-Encoding: %s), which the gateway does not read; send it unencoded", a.ID, quoted(ce)), 0)
		return
	}
	if r.ContentLength > MaxRequestBody {
		g.refuse(w, a.ID, name, kind, ReasonTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("flock proxy: agent %d: the request body is %d bytes, more than the gateway carries (%d); send less", a.ID, r.ContentLength, MaxRequestBody), 0)
		return
	}
	// The limits are judged before the body is read: a request over one
	// costs the gateway nothing but its headers.
	k := key{a.ID, name}
	scopes := g.scopes(st, k, grant)
	if !g.admitted(w, g.limiter.admit(k, grant, scopes, start), kind) {
		return
	}
	defer g.limiter.done(k)
	// The task it is for, asked of the desk once the request was let
	// through: a worker over its rate costs the bus nothing.
	task, ok := g.taskOf(w, r, a, name, kind)
	if !ok {
		return
	}
	x := &exchange{g: g, agent: a.ID, provider: name, start: start, kind: kind, meter: modelapi.NewMeter(kind), spends: ep.Spends}
	if task != nil {
		if task.budget.Any() {
			g.Store.SetTaskBudget(task.seq, task.budget)
			ts := []scope{g.taskScope(task)}
			if !g.admitted(w, g.limiter.roomIn(k, ts, start), kind) {
				return
			}
			scopes = append(scopes, ts...)
		}
		x.task = task.seq
		g.flights.begin(task.seq)
		defer g.flights.end(task.seq)
	}
	if ep.Judge == nil {
		r.Body, r.ContentLength = http.NoBody, 0
	} else if !g.judge(w, r, x, ep, grant, st, scopes, rest) {
		return
	}
	defer x.release()
	up.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x)))
	// The answer is passed on (or failed); an exchange not recorded by
	// its body's end (a body never read) is recorded now.
	x.finish(true)
}

// scopes are the limits of spending a request of k under grant falls in:
// its grant's, then each budget's its agent is in, in the spec's order.
func (g *Gateway) scopes(st *state, k key, grant spec.Grant) []scope {
	out := []scope{{id: scopeID{grant: k}, limits: grant.Spending(), used: func() (wire.Spend, wire.Spend) {
		return g.Store.Window(k.Agent, k.Provider, g.now())
	}}}
	for _, b := range st.budgets[k.Agent] {
		out = append(out, scope{id: scopeID{budget: b.Name}, limits: b.Limits, used: func() (wire.Spend, wire.Spend) {
			return g.Store.Group(b.Name, g.now())
		}})
	}
	return out
}

// admitted answers a request a limit refuses (the verdict of admit or
// reserve), and says whether it may go on.
func (g *Gateway) admitted(w http.ResponseWriter, v verdict, kind *modelapi.Kind) bool {
	if v.ok {
		return true
	}
	g.Store.Refused(v.ref.Agent, v.ref.Provider, v.ref.Limit)
	if v.ref.TaskSeq != 0 {
		if err := g.Store.TaskOutOfBudget(v.ref.TaskSeq, v.ref.taskBudget, g.now()); err != nil {
			g.logf("gateway: logging task %s out of its budget: %v", v.ref.Task, err)
		}
		// Past a task's budget, waiting does not help: the SDKs that
		// read x-should-retry (Anthropic's, OpenAI's) give up at once.
		w.Header().Set("X-Should-Retry", "false")
	}
	if v.crossing && g.Crossed != nil {
		g.Crossed(v.ref)
	}
	g.refuse(w, v.ref.Agent, v.ref.Provider, kind, ReasonLimit, http.StatusTooManyRequests, v.ref.Line(), v.ref.RetryAfter)
	return false
}

// judge reads a request's body within the bounds of what the gateway
// holds, checks it (exactly one object, no key twice, the fields it
// decides by of their type), reserves the most it may spend against the
// grant's token limits, and makes it the body sent. false: refused, and
// answered.
func (g *Gateway) judge(w http.ResponseWriter, r *http.Request, x *exchange, ep modelapi.Endpoint, grant spec.Grant, st *state, scopes []scope, path string) bool {
	kind := x.kind
	r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBody)
	// A body must come in bodyTimeout: one trickled in holds its place
	// in the buffers no longer.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyTimeout)) // the wall's clock, not the limits' (Now)
	raw, held, err := g.buffers.readBody(x.agent, r)
	rc.SetReadDeadline(time.Time{})
	if err == nil {
		w.Header().Del("Connection")
	}
	var full *errBuffers
	switch {
	case errors.As(err, &full) && full.agentOver:
		g.refuse(w, x.agent, x.provider, kind, ReasonTooLarge, http.StatusTooManyRequests, fmt.Sprintf("flock proxy: agent %d: %v", x.agent, err), time.Second)
		return false
	case errors.As(err, &full):
		g.refuse(w, x.agent, x.provider, kind, ReasonBusy, http.StatusServiceUnavailable, fmt.Sprintf("flock proxy: agent %d: %v", x.agent, err), time.Second)
		return false
	case errors.Is(err, errTooLarge):
		g.refuse(w, x.agent, x.provider, kind, ReasonTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("flock proxy: agent %d: the request body is more than the gateway carries (%d bytes); send less", x.agent, MaxRequestBody), 0)
		return false
	case err != nil:
		g.refuse(w, x.agent, x.provider, kind, ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("flock proxy: agent %d: %v", x.agent, err), 0)
		return false
	}
	x.held = func() { g.buffers.give(x.agent, held) }
	body, err := modelapi.ParseBody(raw)
	var p modelapi.Plan
	if err == nil {
		p, err = ep.Read(body, r.Header, grant.Allowed())
	}
	if err != nil {
		x.release()
		reason, status, line := judged(err, x.agent) // a 400, or a 403 for what the grant does not allow
		g.refuse(w, x.agent, x.provider, kind, reason, status, line, 0)
		return false
	}
	x.inputEstimate, x.maxOutput = InputEstimate(len(raw)), p.MaxOutput
	if ep.Spends {
		model := modelapi.ModelOf(kind, path, body)
		x.price, x.priced = st.prices.Lookup(x.provider, kind.Name, model)
		if !x.priced && slices.ContainsFunc(scopes, func(s scope) bool { return s.limits.Money() }) {
			x.release()
			g.refuse(w, x.agent, x.provider, kind, ReasonUnpriced, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d: the model %s of provider %s has no price, and a limit in dollars applies to this agent (%s); add it to providers[name=%s].prices in the spec, or ask for a model flock's price table has (docs/models.md, \"Prices\")", x.agent, quoted(model), x.provider, moneyScopes(scopes), x.provider), 0)
			return false
		}
		want := wire.Spend{Tokens: x.inputEstimate + p.MaxOutput}
		if x.priced {
			want.Cost = x.price.Most(x.inputEstimate, p.MaxOutput)
		}
		v := g.limiter.reserve(key{x.agent, x.provider}, scopes, want, p.MaxOutput, g.now())
		if !g.admitted(w, v, kind) {
			x.release()
			return false
		}
		x.reserved = want
		for _, s := range scopes {
			x.scopes = append(x.scopes, s.id)
		}
		// Logged before it is sent: a proxy killed while it is under
		// way counts it at what it reserved when it starts again.
		if x.begun, err = g.Store.Begin(x.agent, x.provider, x.start, x.inputEstimate, p.MaxOutput, want.Cost, x.task); err != nil {
			g.logf("gateway: logging a request of agent %d to %s: %v", x.agent, x.provider, err)
		}
	}
	pieces, n := body.With(p.Edits)
	r.Body = &heldBody{Reader: modelapi.PiecesReader(pieces), give: x.release}
	r.ContentLength = int64(n)
	r.Header.Set("Content-Length", strconv.Itoa(n))
	r.Header.Del("Transfer-Encoding")
	return true
}

// bodyTimeout is how long a request's body may take to arrive whole.
const bodyTimeout = time.Minute

// InputEstimate is the input tokens a body of n bytes is taken to hold
// until its answer says: one per three bytes, more than the four bytes a
// token of English text or code takes (images and other base64 take far
// fewer), so that a reservation holds for the text agents send.
func InputEstimate(n int) uint64 { return uint64(n+2) / 3 }

// Reasons a request is refused (the journal's REASON=).
const (
	ReasonNotAgent   = "not-an-agent"
	ReasonNoProvider = "no-provider"
	ReasonNoGrant    = "no-grant"
	ReasonNoEndpoint = "not-metered"
	ReasonTooLarge   = "too-large"
	ReasonBadRequest = "bad-request"
	ReasonLimit      = "over-limit"
	ReasonBusy       = "busy"
	ReasonUpstream   = "provider-unreachable"
	// ReasonUnpriced is a model without a price where a limit in
	// dollars applies.
	ReasonUnpriced = "unpriced"
	// ReasonTool is a server tool or beta the grant does not allow, or a
	// tool the gateway does not know (modelapi.NotAllowed).
	ReasonTool = "server-tool"
)

// moneyScopes names the scopes of scopes that limit dollars.
func moneyScopes(scopes []scope) string {
	var out []string
	for _, s := range scopes {
		switch {
		case !s.limits.Money():
		case s.id.budget != "":
			out = append(out, "budget "+s.id.budget)
		case s.task != nil:
			out = append(out, "the budget of its task "+quoted(s.task.id))
		default:
			out = append(out, "its grant of "+s.id.grant.Provider)
		}
	}
	return strings.Join(out, ", ")
}

// judged is how the gateway answers a body its judge refused: what the
// grant does not allow is a 403, anything else (a modelapi.BadBody) a 400
// naming the problem.
func judged(err error, agent int) (reason string, status int, line string) {
	var r *modelapi.NotAllowed
	if errors.As(err, &r) {
		return ReasonTool, http.StatusForbidden, fmt.Sprintf("flock proxy: agent %d: %s", agent, r.Line(agent))
	}
	return ReasonBadRequest, http.StatusBadRequest, fmt.Sprintf("flock proxy: agent %d: %v", agent, err)
}

// refuse answers a request flock does not forward, and says so; a limit's
// refusals are told as their crossing (Crossed), not one by one.
func (g *Gateway) refuse(w http.ResponseWriter, agent int, provider string, kind *modelapi.Kind, reason string, status int, line string, retry time.Duration) {
	if g.Refused != nil && reason != ReasonLimit {
		g.Refused(agent, provider, reason, status, line)
	}
	apiError(w, kind, status, line, retry)
}

// apiError writes an error the way provider kind's API writes its own, so
// an SDK raises its usual exception with the message flock gives (every
// SDK reads the message). Kind nil (the provider is not known) writes a
// body each reads.
func apiError(w http.ResponseWriter, kind *modelapi.Kind, status int, msg string, retryAfter time.Duration) {
	b, _ := json.Marshal(modelapi.ErrorBody(kind, status, msg))
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	// The SDKs retry 429 and 5xx by themselves; they wait what
	// retry-after says.
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
	}
	h.Set("X-Flock-Proxy", "refused")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// grantsLine lists an agent's grants with their base URLs.
func grantsLine(a Agent) string {
	names := slices.Sorted(maps.Keys(a.Grants))
	if len(names) == 0 {
		return "it is granted none"
	}
	return "it is granted " + strings.Join(names, ", ") + " (the base URLs in its environment: " + strings.Join(mapNames(names, spec.GrantURLEnv), ", ") + ")"
}

func mapNames(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// splitProvider reads /<provider>/<rest>.
func splitProvider(path string) (string, string) {
	path = strings.TrimPrefix(path, "/")
	name, rest, _ := strings.Cut(path, "/")
	return name, "/" + rest
}

// quoted is what the client sent, short and quoted.
var quoted = modelapi.Quoted

// Reports are the agents' counts as the bus hears them, for ids.
func (g *Gateway) Reports(ids []int) []wire.ModelReport {
	pol := g.Policy()
	limits := map[int]map[string]wire.ModelLimits{}
	for _, a := range pol.Agents {
		m := map[string]wire.ModelLimits{}
		for name, gr := range a.Grants {
			m[name] = gr.Limits()
		}
		limits[a.ID] = m
	}
	now := g.now()
	budgets := map[int]map[string]wire.BudgetUse{}
	for _, b := range pol.Budgets {
		day, month := g.Store.Group(b.Name, now)
		use := wire.BudgetUse{Day: day, Month: month, TokensPerDay: b.Limits.TokensPerDay, TokensPerMonth: b.Limits.TokensPerMonth,
			USDPerDay: b.Limits.USDPerDay, USDPerMonth: b.Limits.USDPerMonth}
		for _, a := range b.Agents {
			if budgets[a] == nil {
				budgets[a] = map[string]wire.BudgetUse{}
			}
			budgets[a][b.Name] = use
		}
	}
	out := make([]wire.ModelReport, 0, len(ids))
	for _, id := range ids {
		out = append(out, wire.ModelReport{Agent: id, At: now, Usage: g.Store.Usage(id), Limit: limits[id], Budgets: budgets[id]})
	}
	return out
}

// Serves says whether agent id has grants in force here.
func (g *Gateway) Serves(id int) bool {
	st := g.state.Load()
	return st != nil && st.ids[id]
}

// Granted are the ids of the agents with grants in force.
func (g *Gateway) Granted() []int {
	var ids []int
	for _, a := range g.Policy().Agents {
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

var errNoExchange = errors.New("no exchange in the request's context")
