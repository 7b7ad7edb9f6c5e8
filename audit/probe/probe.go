// Package probe is flock's hostile operations: what an agent would try to
// reach another agent, the host or the bus. Each op is a function of a
// Request; its Result says whether the channel worked. flock-agent runs a
// batch of them as an agent, inside its real unit (`flock-agent probe`,
// driven by flockctl audit); the system tests' probe program runs them
// one at a time. OK means the operation worked: for an attack, a hole.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Request is one operation. Fields beyond Op are per operation.
type Request struct {
	Op   string `json:"op"`
	Addr string `json:"addr,omitempty"` // host:port, or a UNIX path ("@name" is abstract); nats-*: the server's URL
	Path string `json:"path,omitempty"` // nats-*: a seed to connect with instead of the agent's
	Data string `json:"data,omitempty"`
	Mode string `json:"mode,omitempty"` // octal, e.g. "0666"; empty: leave to the umask
	Key  int    `json:"key,omitempty"`  // SysV IPC key
	Name string `json:"name,omitempty"` // POSIX mqueue name, e.g. /flock-collude; nats-*: the subject
	PID  int    `json:"pid,omitempty"`
	Sig  int    `json:"sig,omitempty"`
	// Count is how many messages "nats-flood" publishes; of the share
	// floods (shares.go), how many of the thing to try to hold.
	Count int `json:"count,omitempty"`
	// Size is the bytes of each message or task of a flood.
	Size int `json:"size,omitempty"`
	// TimeoutMS, if set, is the operation's own bound (a flood takes
	// longer than one attempt); at most MaxTimeout.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// Tries is how often "model-burst" tries while a body is refused (0:
	// once): a control's bodies fill the agent's part exactly, and a
	// request of the agent's own in flight, or the bodies of the probe
	// just before being given back, hold a little of it for a moment.
	Tries int `json:"tries,omitempty"`
	// Alone runs it after the rest of its batch, one at a time: a flood
	// of the agent's shares would refuse the other probes' connections.
	Alone bool `json:"alone,omitempty"`
	// Background: the system tests' probe answers it without waiting for
	// it to end, so the next request runs beside it.
	Background bool `json:"background,omitempty"`
	// Argv is the command of "exec": a program the agent brings, run as
	// the agent, inside its unit.
	Argv []string `json:"argv,omitempty"`
	// Env is more environment "secret-in-env" searches besides the
	// process's own: a control's, known to hold the secret; and the
	// variables "secret-elsewhere" reads before the process's own: a
	// control's HTTPS_PROXY and placeholder. Never an agent's request (it
	// would carry the secret).
	Env []string `json:"env,omitempty"`
	// Send is the request "secret-elsewhere" makes.
	Send *Send `json:"send,omitempty"`
}

// Result is what a request did. For an attack, OK means the channel worked.
type Result struct {
	OK        bool    `json:"ok"`
	Err       string  `json:"err"`
	Detail    string  `json:"detail"`
	ElapsedMS float64 `json:"elapsed_ms"`
	// TimedOut: the operation neither worked nor was refused within its
	// bound; on a loaded host that proves nothing either way. So too an
	// operation that failed before trying (ErrBeforeTheShare, ErrNotSent).
	TimedOut bool `json:"timed_out,omitempty"`
}

func (r Result) String() string {
	if r.OK {
		return fmt.Sprintf("ok (%s, %.0f ms)", r.Detail, r.ElapsedMS)
	}
	return fmt.Sprintf("refused (%s, %.0f ms)", r.Err, r.ElapsedMS)
}

// Timeout bounds an operation inside an agent. Every wall flock builds
// refuses at once (the firewall rejects, the kernel answers EPERM), so a
// refusal never waits for it; a hang is reported as one, never as a wall.
// It is generous because a loaded host is slow to connect and subscribe
// (a VM under software emulation, every agent probing at once, took
// longer than 2 s).
const Timeout = 10 * time.Second

// ControlTimeout bounds root's controls. A control is the proof that a
// probe's channel works where nothing walls it: on a loaded host (a VM
// under software emulation, tens of bus connections at once) it may be
// slow, and a slow proof is still a proof.
const ControlTimeout = 20 * time.Second

// MaxTimeout bounds a request's own TimeoutMS.
const MaxTimeout = time.Minute

// Within is req's bound: its own, else def.
func (r Request) Within(def time.Duration) time.Duration {
	if r.TimeoutMS > 0 {
		return min(time.Duration(r.TimeoutMS)*time.Millisecond, MaxTimeout)
	}
	return def
}

// Run executes req within timeout. An operation that outlives it keeps
// its goroutine (the process is a throw-away probe) but is reported
// failed and TimedOut.
func Run(req Request, timeout time.Duration) Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	done := make(chan Result, 1)
	go func() {
		detail, err := dispatch(ctx, req)
		r := Result{OK: err == nil, Detail: detail}
		if err != nil {
			r.Err, r.TimedOut = err.Error(), ctx.Err() != nil || isTimeout(err) || errors.Is(err, ErrBeforeTheShare) || errors.Is(err, ErrNotSent)
		}
		done <- r
	}()
	var r Result
	select {
	case r = <-done:
	case <-ctx.Done():
		r = Result{Err: fmt.Sprintf("timed out after %s", timeout), TimedOut: true}
	}
	r.ElapsedMS = float64(time.Since(start).Microseconds()) / 1000
	return r
}

// isTimeout: a step of the operation gave up waiting (a dial, a read, a
// flush), which is the same hang seen from inside.
func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// RunAll runs a batch concurrently, then those Alone one at a time
// (each op is bounded by timeout or its own, so the batch is too), and
// answers in the order asked.
func RunAll(reqs []Request, timeout time.Duration) []Result {
	out := make([]Result, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		if !r.Alone {
			wg.Add(1)
			go func() { defer wg.Done(); out[i] = Run(r, r.Within(timeout)) }()
		}
	}
	wg.Wait()
	for i, r := range reqs {
		if r.Alone {
			out[i] = Run(r, r.Within(timeout))
		}
	}
	return out
}

// Batch is what crosses the process boundary: the requests on
// flock-agent's command line, the same batch with Results filled on its
// standard output. Encode and Decode are the only codec of both sides.
type Batch struct {
	Requests []Request `json:"requests"`
	Results  []Result  `json:"results,omitempty"`
	// Hold keeps the answering process, and so the channels its listen
	// and create ops opened, up after it answers, until it is stopped: a
	// colluding peer serving while another agent probes.
	Hold bool `json:"hold,omitempty"`
}

// Encode is b as one line of JSON.
func (b Batch) Encode() []byte {
	out, err := json.Marshal(b)
	if err != nil {
		panic(err) // plain data always marshals
	}
	return out
}

// Decode reads a Batch; answered says Results must match Requests.
func Decode(data []byte, answered bool) (Batch, error) {
	var b Batch
	if err := json.Unmarshal(data, &b); err != nil {
		return Batch{}, fmt.Errorf("probe batch: %w", err)
	}
	if answered && len(b.Results) != len(b.Requests) {
		return Batch{}, fmt.Errorf("probe batch: %d results for %d requests", len(b.Results), len(b.Requests))
	}
	return b, nil
}
