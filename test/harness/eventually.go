package harness

import (
	"fmt"
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
	if err := Within(timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// Within calls cond until it returns nil, every 50 ms, and returns cond's
// last error if that takes longer than timeout: for a caller that gathers
// what went wrong before it fails.
func Within(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for tries := 1; ; tries++ {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("condition not met within %v (%d tries): %w", timeout, tries, err)
		}
		time.Sleep(pollEvery)
	}
}
