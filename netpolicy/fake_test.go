package netpolicy

// Tier: unit.

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestFake(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	p := reference()

	if ok, err := f.Matches(ctx, p); ok || err != nil {
		t.Fatalf("fresh Fake: Matches = %v, %v; want false, nil", ok, err)
	}
	if err := f.Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Matches(ctx, p); !ok || err != nil {
		t.Fatalf("after Ensure: Matches = %v, %v; want true, nil", ok, err)
	}

	// The same intention written in another order is the same table.
	q := p
	q.AgentUIDs = slices.Clone(p.AgentUIDs)
	slices.Reverse(q.AgentUIDs)
	if ok, _ := f.Matches(ctx, q); !ok {
		t.Errorf("reordered uids: Matches = false")
	}

	// A different policy is drift.
	r := p
	r.AgentUIDs = append(slices.Clone(p.AgentUIDs), 42)
	if ok, _ := f.Matches(ctx, r); ok {
		t.Errorf("extra uid: Matches = true")
	}

	// An invalid policy is refused and changes nothing.
	bad := p
	bad.BusPort = 0
	if err := f.Ensure(ctx, bad); err == nil {
		t.Errorf("Ensure of a policy without bus port: no error")
	}
	if ok, _ := f.Matches(ctx, p); !ok || f.Ensures() != 1 {
		t.Errorf("a refused Ensure changed the table (Matches %v, Ensures %d)", ok, f.Ensures())
	}

	if err := f.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Matches(ctx, p); ok || err != nil {
		t.Errorf("after Remove: Matches = %v, %v; want false, nil", ok, err)
	}
	if err := f.Remove(ctx); err != nil {
		t.Errorf("Remove of an absent table: %v", err)
	}
	if _, present := f.Current(); present {
		t.Errorf("after Remove: Current says present")
	}

	boom := errors.New("netlink: boom")
	f.Err = boom
	if err := f.Ensure(ctx, p); !errors.Is(err, boom) {
		t.Errorf("with Err set: Ensure = %v", err)
	}
	if _, err := f.Matches(ctx, p); !errors.Is(err, boom) {
		t.Errorf("with Err set: Matches = %v", err)
	}
}
