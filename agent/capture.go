package agent

import (
	"io"
	"sync"
)

// capture keeps a command's stdout and stderr, the two together at most
// limit bytes. The first byte beyond closes over, so RunCommand can stop
// the command instead of letting it fill the disk or the bus.
type capture struct {
	mu       sync.Mutex
	limit    int
	out, err []byte
	over     bool
	overflow chan struct{} // closed on the first byte beyond limit
}

func newCapture(limit int) *capture {
	return &capture{limit: limit, overflow: make(chan struct{})}
}

// keep appends p to *dst within the shared limit.
func (c *capture) keep(dst *[]byte, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - len(c.out) - len(c.err)
	if len(p) > room {
		*dst = append(*dst, p[:room]...)
		if !c.over {
			c.over = true
			close(c.overflow)
		}
		return
	}
	*dst = append(*dst, p...)
}

// readAll copies r into the capture until r ends or fails; past the limit
// it keeps reading and discarding, so the writer never blocks on a full
// pipe while it is being stopped.
func (c *capture) readAll(r io.Reader, stderr bool) {
	dst := &c.out
	if stderr {
		dst = &c.err
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.keep(dst, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// result returns what was kept and whether anything was dropped.
func (c *capture) result() (out, err string, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.out), string(c.err), c.over
}
