package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Bounds of the request bodies the gateway holds in memory at once: it
// reads a body whole before it sends it (to judge it), so what it holds
// for all agents together is bounded, and one agent may hold a part of
// it only, so that agent's flood leaves room for the others. Beyond
// either, a request is refused before its body is read.
const (
	MaxBuffered         = 128 << 20
	MaxBufferedPerAgent = 2 * MaxRequestBody
	// ProxyMemoryLimit is flock-proxy's Go memory limit (its GOMEMLIMIT
	// unless the environment sets one): the collector works harder as the
	// heap nears it, before the unit's MemoryHigh (512 MiB) throttles the
	// whole proxy. Not lower: the tunnels' copy buffers (64 KiB each) are
	// live memory too, and a collector held under what is live only spins.
	ProxyMemoryLimit = 384 << 20
)

// buffers counts the bytes of request bodies held, in all and per agent.
type buffers struct {
	mu       sync.Mutex
	total    int64
	perAgent map[int]int64
	// Bounds; zero: the package's.
	max, maxPerAgent int64
}

// errBuffers is a body refused for want of room (a 429 for the agent over
// its part, a 503 when the gateway's whole bound is reached).
type errBuffers struct {
	agentOver  bool
	held, want int64
	bound      int64
}

func (e *errBuffers) Error() string {
	if e.agentOver {
		return fmt.Sprintf("the gateway holds %s of this agent's request bodies, and this one needs %s more: over its part (%s); send fewer large requests at once", size(e.held), size(e.want), size(e.bound))
	}
	return fmt.Sprintf("the gateway holds %s of request bodies for all agents, and this one needs %s more: over its bound (%s); retry in a moment", size(e.held), size(e.want), size(e.bound))
}

// size is n bytes for a line: in MiB from one MiB up.
func size(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.4g MiB", float64(n)/(1<<20))
}

func (b *buffers) bounds() (int64, int64) {
	m, pa := b.max, b.maxPerAgent
	if m == 0 {
		m = MaxBuffered
	}
	if pa == 0 {
		pa = MaxBufferedPerAgent
	}
	return m, pa
}

// take holds n bytes for agent, or says why not.
func (b *buffers) take(agent int, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, pa := b.bounds()
	if b.perAgent == nil {
		b.perAgent = map[int]int64{}
	}
	switch {
	case b.perAgent[agent]+n > pa:
		return &errBuffers{agentOver: true, held: b.perAgent[agent], want: n, bound: pa}
	case b.total+n > m:
		return &errBuffers{held: b.total, want: n, bound: m}
	}
	b.perAgent[agent] += n
	b.total += n
	return nil
}

func (b *buffers) give(agent int, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.perAgent[agent] -= n; b.perAgent[agent] <= 0 {
		delete(b.perAgent, agent)
	}
}

// held is what the gateway holds now, for all agents.
func (b *buffers) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// chunk is how much of a body of unknown length is read at a time.
const chunk = 1 << 20

// readBody reads r's body for agent within its bounds, and returns it
// with the bytes held for it (give them back with give). A body larger
// than MaxRequestBody is errTooLarge.
func (b *buffers) readBody(agent int, r *http.Request) ([]byte, int64, error) {
	if r.ContentLength >= 0 {
		n := r.ContentLength
		if err := b.take(agent, n); err != nil {
			return nil, 0, err
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			b.give(agent, n)
			return nil, 0, readErr(err)
		}
		return buf, n, nil
	}
	// Chunked: read a megabyte at a time, holding each, then join them
	// (held twice while joined).
	var parts [][]byte
	var held, size int64
	defer func() { b.give(agent, held) }()
	for {
		if err := b.take(agent, chunk); err != nil {
			return nil, 0, err
		}
		held += chunk
		p := make([]byte, chunk)
		n, err := io.ReadFull(r.Body, p)
		parts, size = append(parts, p[:n]), size+int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, 0, readErr(err)
		}
	}
	if err := b.take(agent, size); err != nil {
		return nil, 0, err
	}
	out := make([]byte, 0, size)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, size, nil
}

var errTooLarge = errors.New("the request body is more than the gateway carries")

func readErr(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errTooLarge
	}
	return fmt.Errorf("the request body could not be read: %w", err)
}

// heldBody is a body sent upstream: its bytes are given back once the
// transport has read it and closed it, or the exchange ends (give is the
// exchange's release, which gives them back once).
type heldBody struct {
	io.Reader
	give func()
}

func (h *heldBody) Close() error {
	h.give()
	return nil
}
