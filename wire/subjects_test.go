package wire

import "testing"

// TestAgentOf reads back the agent of every per-agent subject its own
// function writes, and refuses what no such function writes. Unit tier.
func TestAgentOf(t *testing.T) {
	for _, k := range []struct {
		subjects string
		subject  func(int) string
	}{
		{EgressSubjects, EgressSubject},
		{UsageSubjects, UsageSubject},
		{LeasesSubjects, LeasesSubject},
		{TaskSpendSubjects, TaskSpendSubject},
	} {
		for _, id := range []int{1, 7, 65535} {
			if got, ok := AgentOf(k.subject(id), k.subjects); !ok || got != id {
				t.Errorf("AgentOf(%q, %q) = %d, %v; want %d", k.subject(id), k.subjects, got, ok, id)
			}
		}
		prefix := k.subject(1)[:len(k.subject(1))-1]
		for _, bad := range []string{prefix, prefix + "0", prefix + "-1", prefix + "+1", prefix + "01", prefix + "1.x", prefix + "x", "other." + k.subject(1)} {
			if got, ok := AgentOf(bad, k.subjects); ok {
				t.Errorf("AgentOf(%q, %q) = %d, true; want false", bad, k.subjects, got)
			}
		}
	}
}
