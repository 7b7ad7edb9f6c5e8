package harness

// Splitting a private network (net.go) and healing it: what a switch
// that stops forwarding between some hosts does. The bridge drops the
// frames between the hosts' veths (nftables, bridge family, in the net's
// own namespace: the host's own rules are never touched), so their
// connections hang as across a real split, neither side told; the
// controller, the bridge's own address, still reaches every host.

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// splitTable is the nftables table of a split; Heal deletes it.
const splitTable = "flock_split"

// Cut stops the network forwarding between each pair of hosts (both
// ways), on top of any cut already made; the other pairs and the
// controller are untouched.
func (n *Net) Cut(pairs ...[2]string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var rules []string
	for _, p := range pairs {
		va, vb, err := n.vethsOf(p[0], p[1])
		if err != nil {
			return err
		}
		rules = append(rules,
			fmt.Sprintf("add rule bridge %s forward iifname %q oifname %q drop", splitTable, va, vb),
			fmt.Sprintf("add rule bridge %s forward iifname %q oifname %q drop", splitTable, vb, va))
	}
	script := fmt.Sprintf("add table bridge %s\nadd chain bridge %s forward { type filter hook forward priority 0; policy accept; }\n%s\n",
		splitTable, splitTable, strings.Join(rules, "\n"))
	if err := n.nft(script); err != nil {
		return fmt.Errorf("harness: net %s: cut %v: %w", n.name, pairs, err)
	}
	n.logf("net %s: cut %v", n.name, pairs)
	return nil
}

// Split makes groups of hosts that reach each other and no host of
// another group: every pair across groups is cut (Cut).
func (n *Net) Split(groups ...[]string) error {
	var pairs [][2]string
	for i, g := range groups {
		for _, other := range groups[i+1:] {
			for _, a := range g {
				for _, b := range other {
					pairs = append(pairs, [2]string{a, b})
				}
			}
		}
	}
	return n.Cut(pairs...)
}

// Heal undoes every cut: the network forwards between all hosts again.
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.nft(fmt.Sprintf("add table bridge %s\ndelete table bridge %s\n", splitTable, splitTable)); err != nil {
		return fmt.Errorf("harness: net %s: heal: %w", n.name, err)
	}
	n.logf("net %s: healed", n.name)
	return nil
}

// vethsOf are the bridge's ports of hosts a and b. n.mu is held.
func (n *Net) vethsOf(a, b string) (string, string, error) {
	ia, ib := slices.Index(n.order, a), slices.Index(n.order, b)
	if ia < 0 || ib < 0 || a == b {
		return "", "", fmt.Errorf("hosts %q and %q: want two hosts of the net %v", a, b, n.order)
	}
	return vethName(ia), vethName(ib), nil
}

// vethName is the bridge's port of the i-th host attached (Attach).
func vethName(i int) string { return fmt.Sprintf("v%d", i+1) }

// nft runs an nft script in the net's namespace.
func (n *Net) nft(script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.ip, "netns", "exec", n.name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f - in %s: %w: %s\n%s", n.name, err, bytes.TrimSpace(out), script)
	}
	return nil
}
