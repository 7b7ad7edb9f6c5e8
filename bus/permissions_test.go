package bus

// Tier: unit (no root). A real in-process server answers the operator's
// permissions request with what it handed nats-server, before and after a
// reload; nobody else is answered.

import (
	"slices"
	"testing"
	"time"

	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/wire"
)

func TestPermissionsOverBus(t *testing.T) {
	t.Parallel()
	ids := newIdentities(t, everyone...)
	f := testFlock()
	s := startBus(t, ForFlock(f, ids.keys()), Options{})
	op := connect(t, s, ids, creds.OperatorName)
	ask := func(body []byte) (wire.Permissions, error) {
		t.Helper()
		m, err := op.Request(wire.PermissionsSubject, body, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return wire.ParsePermissions(m.Data)
	}
	want := func(id int) User {
		for _, u := range ForFlock(f, ids.keys()).Users {
			if u.Agent == id {
				return u
			}
		}
		t.Fatalf("no user for agent %d", id)
		return User{}
	}

	for _, id := range []int{1, 2, 3} {
		p, err := ask(wire.PermissionsRequest(id))
		u := want(id)
		if err != nil || p.Agent != id || p.User != u.Name || p.Nkey != u.Nkey ||
			!slices.Equal(p.Publish.Allow, u.Publish) || !slices.Equal(p.Subscribe.Allow, u.Subscribe) ||
			len(p.Publish.Deny)+len(p.Subscribe.Deny) != 0 || (p.Responses != nil) != (u.ResponseTTL > 0) {
			t.Errorf("agent %d: %+v, %v; want the lists of %+v", id, p, err, u)
		}
	}
	for _, body := range []string{"99", "0", "-1", "2 ", "02", "2;3", ""} {
		if p, err := ask([]byte(body)); err == nil {
			t.Errorf("request %q answered %+v, want a refusal", body, p)
		}
	}

	// A reload that widens agent 2 is what the bus answers next.
	f.Agents[1].Subjects.Publish = append(f.Agents[1].Subjects.Publish, "wide.>")
	if err := s.Reload(ForFlock(f, ids.keys())); err != nil {
		t.Fatal(err)
	}
	if p, err := ask(wire.PermissionsRequest(2)); err != nil || !slices.Contains(p.Publish.Allow, "wide.>") {
		t.Errorf("after the reload agent 2 may publish %v (%v), want wide.> among them", p.Publish.Allow, err)
	}

	// An agent may not ask: flock.bus.* is the operator's.
	for _, name := range []string{"flock-1", "flock-2", "flock-3"} {
		c := connect(t, s, ids, name)
		if m, err := c.Request(wire.PermissionsSubject, wire.PermissionsRequest(2), 500*time.Millisecond); err == nil {
			t.Errorf("%s asked for agent 2's permissions and got %s", name, m.Data)
		}
		c.waitErr(t, "Permissions Violation for Publish to \""+wire.PermissionsSubject+"\"")
	}
}
