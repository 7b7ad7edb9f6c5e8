package harness

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually retries.
const pollEvery = 50 * time.Millisecond

// Eventually calls cond until it returns nil, every 50 ms, and fails the
// test with cond's last error if that takes longer than timeout.
func (m *Machine) Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	Eventually(t, timeout, cond)
}

// Eventually is Machine.Eventually for conditions that need no machine.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(timeout)
	for tries := 1; ; tries++ {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v (%d tries): %v", timeout, tries, err)
			return
		}
		time.Sleep(pollEvery)
	}
}
