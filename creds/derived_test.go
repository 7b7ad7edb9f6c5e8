package creds

// Tier: unit (no root). Derived seeds: the same on every host, written
// over a different one, never for the operator or the proxy.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestDerivedSeedsAreTheSameOnEveryHost(t *testing.T) {
	ctx := context.Background()
	secret := secretOf(0x5e)
	a := Store{Dir: filepath.Join(t.TempDir(), "a"), Secret: secret}
	b := Store{Dir: filepath.Join(t.TempDir(), "b"), Secret: secret}
	pubA, createdA, err := a.Ensure(ctx, "flock-3")
	if err != nil || !createdA {
		t.Fatalf("host a: %v, created %v", err, createdA)
	}
	pubB, _, err := b.Ensure(ctx, "flock-3")
	if err != nil {
		t.Fatal(err)
	}
	seedA, _ := os.ReadFile(a.Path("flock-3"))
	seedB, _ := os.ReadFile(b.Path("flock-3"))
	if pubA != pubB || !bytes.Equal(seedA, seedB) {
		t.Errorf("host a has %s, host b %s", pubA, pubB)
	}
	if k, err := AgentKey(secret, "flock-3"); err != nil || k != pubA {
		t.Errorf("AgentKey = %s (%v), the seed's key %s", k, err, pubA)
	}
	if k, _ := AgentKey(secret, "flock-4"); k == pubA {
		t.Error("two agents have one key")
	}
	if k, _ := AgentKey(secretOf(0x5f), "flock-3"); k == pubA {
		t.Error("another secret gives the same key")
	}
	if again, created, err := a.Ensure(ctx, "flock-3"); err != nil || created || again != pubA {
		t.Errorf("second Ensure: %s created %v (%v)", again, created, err)
	}

	// The operator's and the proxy's stay random, each host its own.
	opA, _, _ := a.Ensure(ctx, OperatorName)
	opB, _, _ := b.Ensure(ctx, OperatorName)
	if opA == opB {
		t.Error("the operator's key is the same on two hosts")
	}
	if _, err := AgentKey(secret, OperatorName); err == nil {
		t.Error("AgentKey derived the operator's key")
	}
}

func TestDerivedSeedReplacesAnother(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "creds")
	random, _, err := Store{Dir: dir}.Ensure(ctx, "flock-1")
	if err != nil {
		t.Fatal(err)
	}
	s := Store{Dir: dir, Secret: secretOf(1)}
	pub, created, err := s.Ensure(ctx, "flock-1")
	if err != nil || !created || pub == random {
		t.Fatalf("over a random seed: %s created %v (%v)", pub, created, err)
	}
	if fi, err := os.Stat(s.Path("flock-1")); err != nil || fi.Mode() != 0o600 {
		t.Errorf("replaced seed: %v %v", fi.Mode(), err)
	}
	keys, _ := s.Keys(ctx)
	if keys["flock-1"] != pub {
		t.Errorf("Keys has %s, want %s", keys["flock-1"], pub)
	}
	// Another secret: replaced again.
	if other, created, err := (Store{Dir: dir, Secret: secretOf(2)}).Ensure(ctx, "flock-1"); err != nil || !created || other == pub {
		t.Errorf("another secret: %s created %v (%v)", other, created, err)
	}
	// A damaged one is simply written again: its content is known.
	if err := os.WriteFile(s.Path("flock-1"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if again, created, err := s.Ensure(ctx, "flock-1"); err != nil || !created || again != pub {
		t.Errorf("over a damaged seed: %s created %v (%v)", again, created, err)
	}
	// A symlink is refused, as for random seeds.
	if err := os.Remove(s.Path("flock-1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", s.Path("flock-1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Ensure(ctx, "flock-1"); err == nil {
		t.Error("wrote through a symlink")
	}
}

func TestFakeDerivesAsStoreDoes(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	random, _, _ := f.Ensure(ctx, "flock-2")
	f.Secret = secretOf(3)
	pub, created, err := f.Ensure(ctx, "flock-2")
	want, _ := AgentKey(f.Secret, "flock-2")
	if err != nil || !created || pub != want || pub == random {
		t.Errorf("fake: %s created %v (%v), want %s", pub, created, err, want)
	}
	if _, created, _ := f.Ensure(ctx, "flock-2"); created {
		t.Error("fake replaced its derived key")
	}
}

// secretOf is a cluster secret of 32 bytes b (cluster.SecretSize).
func secretOf(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
