package gateway

// Tier: unit.

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

type failingUIDs struct{ asked int }

func (f *failingUIDs) UID(_, _ netip.AddrPort) (uint32, error) {
	f.asked++
	return 0, errors.New("not asked for an owned connection")
}

type ownedConn struct {
	net.Conn
	uid uint32
}

func (c ownedConn) OwnerUID() uint32 { return c.uid }

// A connection whose listener already knows its uid (flock-proxy's, for
// one it holds a share for) is not looked up again; any other is.
func TestConnContextTakesTheOwnersUID(t *testing.T) {
	uids := &failingUIDs{}
	g := &Gateway{UIDs: uids}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	p := g.ConnContext(context.Background(), ownedConn{Conn: a, uid: 2000000007}).Value(ctxKey{}).(peer)
	if p.uid != 2000000007 || p.err != nil || uids.asked != 0 {
		t.Errorf("owned connection: peer %+v, kernel asked %d times; want uid 2000000007 and no question", p, uids.asked)
	}
	if p := g.ConnContext(context.Background(), a).Value(ctxKey{}).(peer); p.err == nil || uids.asked != 1 {
		t.Errorf("plain connection: peer %+v, kernel asked %d times; want it asked once", p, uids.asked)
	}
}
