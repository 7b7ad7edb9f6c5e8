package bus

// A user's grants as nats-server enforces them (permissions), and as the
// bus reports them to the operator (Server.Permissions, the answer to
// wire.PermissionsSubject): both from the one function, so what explain
// shows is what the server holds. Which grants each user gets is
// grants.go's.

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// Permissions are agent id's permissions as this bus handed them to
// nats-server: those of the config last started or reloaded with success,
// built by the same code that built the server's options.
func (s *Server) Permissions(id int) wire.Permissions {
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	for _, u := range cfg.Users {
		if u.Agent == id && id > 0 {
			return WirePermissions(u)
		}
	}
	return wire.Permissions{Agent: id, Error: fmt.Sprintf("agent %d has no user on this bus", id)}
}

// permissions turns u's lists into nats-server's. An empty list must
// deny everything: to nats-server an absent allow list allows all.
func permissions(u User) *server.Permissions {
	list := func(l []string) *server.SubjectPermission {
		if len(l) == 0 {
			return &server.SubjectPermission{Deny: []string{">"}}
		}
		return &server.SubjectPermission{Allow: append([]string(nil), l...)}
	}
	p := &server.Permissions{Publish: list(u.Publish), Subscribe: list(u.Subscribe)}
	if u.ResponseTTL > 0 {
		p.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: u.ResponseTTL}
	}
	return p
}

// WirePermissions are u's permissions as the bus hands them to nats-server,
// in the form the bus answers with.
func WirePermissions(u User) wire.Permissions {
	p := permissions(u)
	rules := func(sp *server.SubjectPermission) wire.SubjectRules {
		r := wire.SubjectRules{Allow: []string{}, Deny: []string{}}
		if sp != nil {
			r.Allow = append(r.Allow, sp.Allow...)
			r.Deny = append(r.Deny, sp.Deny...)
		}
		return r
	}
	w := wire.Permissions{Agent: u.Agent, User: u.Name, Nkey: u.Nkey, Publish: rules(p.Publish), Subscribe: rules(p.Subscribe)}
	if p.Response != nil {
		w.Responses = &wire.Responses{MaxMsgs: p.Response.MaxMsgs, Expires: p.Response.Expires}
	}
	return w
}

// onPermissions answers the operator's wire.PermissionsSubject request.
func (s *Server) onPermissions(m *nats.Msg) {
	p := wire.Permissions{}
	if id, err := wire.ParsePermissionsRequest(m.Data); err != nil {
		p.Error = err.Error()
	} else {
		p = s.Permissions(id)
	}
	data, err := wire.EncodePermissions(p)
	if err != nil {
		s.log.Errorf("encoding the permissions of agent %d: %v", p.Agent, err)
		return
	}
	s.respond(m, data)
}
