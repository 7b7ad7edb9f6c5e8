package bus

import (
	"encoding/base64"
	"fmt"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/flockrun/flock/wire"
)

// gate is the bus's authentication: nats-server's own nkey check (the
// client signs the server's nonce with its seed), done by the bus so that
// it can also hold each identity to its share of connections. nats-server
// has no per-user connection limit outside accounts, and an account per
// agent would cut the one subject space agents share (docs/design.md,
// "Shares"). Each connection let in is remembered by the server's id for
// it; an identity at its share has its remembered connections checked
// against the server's live ones before a new one is refused, so a closed
// connection never counts (nats-server drops a client from its table as
// it closes it: a killed agent's restart finds its old connections gone).
//
// nats-server's reload would close every connection of a custom
// authentication (it looks each client's nkey up in its own table, which
// it does not build then), so the users are never in its options: a
// reload changes the gate's users (set), and the bus closes the
// connections of an identity gone or whose permissions changed (its
// client reconnects under the new ones); nothing else is touched.
type gate struct {
	live func(cid uint64) bool // whether the server still holds connection cid
	// refused is told of each connection over its identity's share.
	refused func(u gateUser, held int)

	mu      sync.Mutex
	users   map[string]gateUser            // by public nkey
	open    map[string]map[uint64]struct{} // by public nkey: the connections let in
	refusal map[uint64]bool                // connections refused over a share, until the server logged them
}

// maxRefusals bounds what the gate remembers of refused connections for
// the log, should the server not log some.
const maxRefusals = 4096

// gateUser is one identity and its share; max 0: no share (the bus's own
// user, the operator).
type gateUser struct {
	nkey  *server.NkeyUser
	name  string
	agent int
	max   int
	perms string // its grants, to see them change
}

func newGate(live func(uint64) bool, refused func(gateUser, int)) *gate {
	return &gate{live: live, refused: refused, users: map[string]gateUser{}, open: map[string]map[uint64]struct{}{}, refusal: map[uint64]bool{}}
}

// set makes users the identities let in from now on, and returns the
// connections to close: those of an identity gone or whose grants changed.
func (g *gate) set(users []gateUser) (stale []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.users
	g.users = make(map[string]gateUser, len(users))
	for _, u := range users {
		g.users[u.nkey.Nkey] = u
	}
	for k, conns := range g.open {
		if u, ok := g.users[k]; ok && u.perms == old[k].perms {
			continue
		}
		for id := range conns {
			stale = append(stale, id)
		}
		delete(g.open, k)
	}
	return stale
}

// registrar is the part of nats-server's client that Check needs beyond
// server.ClientAuthentication (its nkey user's permissions).
type registrar interface {
	RegisterNkeyUser(*server.NkeyUser) error
}

// Check implements server.Authentication.
func (g *gate) Check(c server.ClientAuthentication) bool {
	opts := c.GetOpts()
	if opts == nil || opts.Nkey == "" || c.Kind() != server.CLIENT {
		return false
	}
	reg, ok := c.(registrar)
	if !ok {
		return false
	}
	g.mu.Lock()
	u, known := g.users[opts.Nkey]
	g.mu.Unlock()
	if !known || !signed(opts.Nkey, opts.Sig, c.GetNonce()) {
		return false
	}
	cid := c.GetID()
	g.mu.Lock()
	conns := g.open[opts.Nkey]
	if conns == nil {
		conns = map[uint64]struct{}{}
		g.open[opts.Nkey] = conns
	}
	if u.max > 0 && len(conns) >= u.max {
		for id := range conns {
			if !g.live(id) {
				delete(conns, id)
			}
		}
		if len(conns) >= u.max {
			held := len(conns)
			if len(g.refusal) >= maxRefusals {
				clear(g.refusal)
			}
			g.refusal[cid] = true
			g.mu.Unlock()
			g.refused(u, held)
			return false
		}
	}
	conns[cid] = struct{}{}
	g.mu.Unlock()
	if err := reg.RegisterNkeyUser(u.nkey); err != nil {
		g.forget(opts.Nkey, cid)
		return false
	}
	return true
}

// wasRefused reports (once) whether the gate refused connection cid over
// its share.
func (g *gate) wasRefused(cid uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.refusal[cid]
	delete(g.refusal, cid)
	return r
}

func (g *gate) forget(nkey string, cid uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.open[nkey], cid)
}

// signed verifies sig (base64, as clients send it) of nonce by the
// public key pub, as nats-server does.
func signed(pub, sig string, nonce []byte) bool {
	if sig == "" || len(nonce) == 0 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return false
	}
	return kp.Verify(nonce, raw) == nil
}

// gateUsers are the identities of c (and the bus's own) with their
// permissions and shares.
func (s *Server) gateUsers(c Config) []gateUser {
	nks := s.nkeyUsers(c)
	out := make([]gateUser, 0, len(nks))
	byKey := map[string]User{}
	for _, u := range c.Users {
		byKey[u.Nkey] = u
	}
	for _, nk := range nks {
		u := byKey[nk.Nkey]
		if nk.Nkey == s.selfPub {
			u = selfUser(s.selfPub, s.inbox)
		}
		out = append(out, gateUser{nkey: nk, name: u.Name, agent: u.Agent, max: u.Connections,
			perms: fmt.Sprint(u.Publish, u.Subscribe, u.ResponseTTL)})
	}
	return out
}

// overConnections is the gate's report of a connection refused over its
// identity's share.
func (s *Server) overConnections(u gateUser, held int) {
	if u.agent > 0 {
		s.Violation(u.agent, wire.ViolationConnections, fmt.Sprintf("a connection refused: it holds %d, its share (shares.connections) is %d", held, u.max))
		return
	}
	s.log.Warnf("%s: a connection refused: it holds %d, its share is %d", u.name, held, u.max)
}
