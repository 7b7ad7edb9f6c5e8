package bus

import (
	"fmt"
	"slices"
	"time"

	"github.com/flockrun/flock/spec"
)

// Tasks is how the bus keeps tasks and results on disk (JetStream). A
// zero field takes its default, so a configuration written before tasks
// were durable still reads.
type Tasks struct {
	StoreMax      int64 `json:"store_max,omitempty"`      // bytes on disk for tasks, results and dead letters
	MemoryMax     int64 `json:"memory_max,omitempty"`     // bytes of memory JetStream may hold
	MaxDeliveries int   `json:"max_deliveries,omitempty"` // deliveries of a task before it is dead-lettered
	// AckWait is how long a worker may hold a task without a word before
	// it goes to another one: flock-agent says "still working" every
	// AckWait/3 while its command runs.
	AckWait time.Duration `json:"ack_wait,omitempty"`
	// ResultWindow is how long a stored result makes a second one for the
	// same task a duplicate: as long as a task may take to run again on
	// every redelivery.
	ResultWindow time.Duration `json:"result_window,omitempty"`
	// Sync is spec.Bus.Sync: 0 (spec.SyncAlways) has nats-server write
	// every stored message through to the disk before it acknowledges it
	// (SyncAlways); else it syncs in the background this often. A
	// configuration written before the field reads as always.
	Sync time.Duration `json:"sync,omitempty"`
	// Workers are the agents pulling their own tasks (tasks.agent.N)
	// through consumer agent-N, by id.
	Workers []int `json:"workers"`
	// Metered are the workers granted model APIs, whose requests
	// flock-proxy charges to their tasks: the desk asks it for their
	// tasks' spend, and no other's (a worker without models spends
	// nothing, and its result does not wait on the proxy).
	Metered []int `json:"metered,omitempty"`
}

// Defaults and bounds of Tasks.
const (
	DefaultStoreMax  = spec.DefaultStoreMax
	DefaultMemoryMax = 64 << 20
	MinStoreMax      = spec.MinStoreMax
	// DefaultAckWait: a worker busy with a task says so every 10 s; one
	// silent for 30 s is taken for dead and its task handed out again.
	DefaultAckWait = 30 * time.Second
	// ResultsMaxAge is how long results are kept; ResultWindow never
	// exceeds it (JetStream refuses a window longer than the age).
	ResultsMaxAge = 7 * 24 * time.Hour
	// DeadMaxAge is how long dead letters are kept for the operator.
	DeadMaxAge = 30 * 24 * time.Hour
)

func (t Tasks) withDefaults() Tasks {
	if t.StoreMax == 0 {
		t.StoreMax = DefaultStoreMax
	}
	if t.MemoryMax == 0 {
		t.MemoryMax = DefaultMemoryMax
	}
	if t.MaxDeliveries == 0 {
		t.MaxDeliveries = spec.DefaultMaxDeliveries
	}
	if t.AckWait == 0 {
		t.AckWait = DefaultAckWait
	}
	if t.ResultWindow == 0 {
		t.ResultWindow = resultWindow(t.MaxDeliveries, spec.DefaultTimeout, t.AckWait)
	}
	return t
}

// resultWindow covers every delivery of a task running for at most
// timeout: a result stored by the first is still known when the last ends.
func resultWindow(deliveries int, timeout, ackWait time.Duration) time.Duration {
	return min(time.Duration(deliveries)*(timeout+ackWait), ResultsMaxAge)
}

func (t Tasks) validate() error {
	switch {
	case t.StoreMax != 0 && t.StoreMax < MinStoreMax:
		return fmt.Errorf("store_max %d is below %d bytes", t.StoreMax, int64(MinStoreMax))
	case t.MemoryMax < 0:
		return fmt.Errorf("negative memory_max %d", t.MemoryMax)
	case t.MaxDeliveries < 0 || t.MaxDeliveries > spec.MaxDeliveriesLimit:
		return fmt.Errorf("max_deliveries %d is not 1-%d", t.MaxDeliveries, spec.MaxDeliveriesLimit)
	case t.AckWait < 0:
		return fmt.Errorf("negative ack_wait %s", t.AckWait)
	case t.Sync < 0:
		return fmt.Errorf("negative sync %s (0 is always)", t.Sync)
	case t.ResultWindow < 0 || t.ResultWindow > ResultsMaxAge:
		return fmt.Errorf("result_window %s is not within %s", t.ResultWindow, ResultsMaxAge)
	}
	for i, id := range t.Workers {
		if id < 1 || id > spec.MaxID || (i > 0 && id <= t.Workers[i-1]) {
			return fmt.Errorf("workers: %v is not a sorted list of distinct agent ids", t.Workers)
		}
	}
	for i, id := range t.Metered {
		if _, ok := slices.BinarySearch(t.Workers, id); !ok || (i > 0 && id <= t.Metered[i-1]) {
			return fmt.Errorf("metered: %v is not a sorted list of distinct workers", t.Metered)
		}
	}
	return nil
}
