package netpolicy

// Tier: unit. What Fake adds for planner tests (Policy, Ensures, Err);
// its Firewall contract is firewallConformance's.

import (
	"context"
	"errors"
	"testing"
)

func TestFake(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	p := reference()
	if err := f.Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}
	bad := p
	bad.BusPort = 0
	if err := f.Ensure(ctx, bad); err == nil {
		t.Errorf("Ensure of a policy without bus port: no error")
	}
	if cur, present := f.Policy(); !present || cur.String() != p.String() || f.Ensures() != 1 {
		t.Errorf("after one Ensure and one refused: Policy %v, %v; Ensures %d", cur, present, f.Ensures())
	}
	if err := f.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, present := f.Policy(); present {
		t.Errorf("after Remove: Policy says present")
	}

	boom := errors.New("netlink: boom")
	f.Err = boom
	if err := f.Ensure(ctx, p); !errors.Is(err, boom) {
		t.Errorf("with Err set: Ensure = %v", err)
	}
	if _, err := f.Matches(ctx, p); !errors.Is(err, boom) {
		t.Errorf("with Err set: Matches = %v", err)
	}
	if err := f.Remove(ctx); !errors.Is(err, boom) {
		t.Errorf("with Err set: Remove = %v", err)
	}
}
