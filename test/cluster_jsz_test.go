package test

// Tier: root + nspawn + ansible. JetStream's cluster as TestCluster reads
// it from each host's bus monitoring endpoint: formed, and caught up.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/wire"
)

// jsz is what the bus's monitoring endpoint says of JetStream
// (/jsz?accounts=true&streams=true): the meta cluster and each stream's
// state and replicas, as this server sees them.
type jsz struct {
	Meta *struct {
		Leader string `json:"leader"`
		Size   int    `json:"cluster_size"`
	} `json:"meta_cluster"`
	Accounts []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name    string `json:"name"`
			Cluster *struct {
				Leader   string `json:"leader"`
				Replicas []struct {
					Name    string `json:"name"`
					Current bool   `json:"current"`
					Offline bool   `json:"offline"`
					Lag     uint64 `json:"lag"`
				} `json:"replicas"`
			} `json:"cluster"`
			State struct {
				Messages uint64 `json:"messages"`
				FirstSeq uint64 `json:"first_seq"`
				LastSeq  uint64 `json:"last_seq"`
			} `json:"state"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

var clusterStreams = []string{wire.TasksStream, wire.ResultsStream, wire.DeadStream}

func readJsz(t testing.TB, m *harness.Machine) (jsz, error) {
	t.Helper()
	var j jsz
	out, stderr, err := run(t, m, "curl", "-sS", "-m", "5", "http://127.0.0.1:8222/jsz?accounts=true&streams=true")
	if err != nil {
		return j, fmt.Errorf("machine %s: /jsz: %v %s", m.Name(), err, stderr)
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		return j, fmt.Errorf("machine %s: /jsz: %v\n%s", m.Name(), err, out)
	}
	return j, nil
}

// streamStates is each flock stream's state on the server that answered
// j (named server), and what is not yet right with the streams this
// server leads: replicas besides it missing, not current or lagging (only
// a stream's leader knows its replicas' progress).
func streamStates(j jsz, server string) (map[string]string, []string) {
	states := map[string]string{}
	var wrong []string
	for _, acc := range j.Accounts {
		for _, s := range acc.Streams {
			if !slices.Contains(clusterStreams, s.Name) {
				continue
			}
			states[s.Name] = fmt.Sprintf("messages %d, seq %d..%d", s.State.Messages, s.State.FirstSeq, s.State.LastSeq)
			if s.Cluster == nil || s.Cluster.Leader != server {
				continue
			}
			if len(s.Cluster.Replicas) != 2 {
				wrong = append(wrong, fmt.Sprintf("%s (led by %s): %d replicas besides the leader, want 2", s.Name, server, len(s.Cluster.Replicas)))
			}
			for _, r := range s.Cluster.Replicas {
				if !r.Current || r.Offline || r.Lag > 0 {
					wrong = append(wrong, fmt.Sprintf("%s (led by %s): replica %s current %v offline %v lag %d", s.Name, server, r.Name, r.Current, r.Offline, r.Lag))
				}
			}
		}
	}
	return states, wrong
}

// clusterState reads every host's JetStream view and says what is not
// yet a formed cluster: a meta cluster of all the hosts, each flock stream
// on every host, led by one, its replicas current as its leader sees
// them, and the same state on every host. It returns each host's states.
func clusterState(t testing.TB, h *harness.Hosts) (map[string]map[string]string, error) {
	t.Helper()
	all := map[string]map[string]string{}
	led := map[string]bool{}
	var wrong []string
	for _, name := range h.Names() {
		m := h.Machine(name)
		j, err := readJsz(t, m)
		if err != nil {
			return nil, err
		}
		if j.Meta == nil || j.Meta.Leader == "" || j.Meta.Size != len(h.Names()) {
			wrong = append(wrong, fmt.Sprintf("host %s: meta cluster %+v", name, j.Meta))
		}
		states, w := streamStates(j, name)
		all[name] = states
		wrong = append(wrong, w...)
		for _, acc := range j.Accounts {
			for _, s := range acc.Streams {
				if s.Cluster != nil && s.Cluster.Leader == name {
					led[s.Name] = true
				}
			}
		}
	}
	for _, s := range clusterStreams {
		if !led[s] {
			wrong = append(wrong, s+": no host leads it")
		}
		for _, name := range h.Names() {
			if all[name][s] != all[h.Names()[0]][s] {
				wrong = append(wrong, fmt.Sprintf("%s: host %s has %q, host %s %q", s, name, all[name][s], h.Names()[0], all[h.Names()[0]][s]))
			}
		}
	}
	if len(wrong) > 0 {
		return all, fmt.Errorf("%s", strings.Join(wrong, "; "))
	}
	return all, nil
}

// waitClusterFormed waits until clusterState has nothing to say, and
// returns when.
func waitClusterFormed(t testing.TB, h *harness.Hosts, timeout time.Duration) time.Time {
	t.Helper()
	harness.Eventually(t, timeout, func() error {
		_, err := clusterState(t, h)
		return err
	})
	return time.Now()
}
