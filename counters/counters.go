// Package counters carries table inet flock's per-uid refusal counters
// from the one process that may read them to flock.service's /metrics,
// which may not: reading nftables takes CAP_NET_ADMIN, and the bus faces
// every agent with no capability at all. systemd listens on SocketPath
// (flock-counters.socket, which only the bus's user may connect to) and
// starts a reader for each connection (Accept=yes): `flockctl counters`,
// with CAP_NET_ADMIN alone, writes one Answer and exits (Serve). The bus
// asks at scrape time (Client). Both ends encode and decode here.
package counters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/flockrun/flock/netpolicy"
)

// SocketPath is where flock-counters.socket listens: in /run, which
// agents see read-only, a socket of the bus's user's, mode 0600, that
// systemd removes when the socket unit stops.
const SocketPath = "/run/flock-counters.sock"

// maxAnswer bounds what Client reads: 1000 agents take about 60 KB.
const maxAnswer = 4 << 20

// Answer is what the reader writes on the connection, as JSON: the
// counters by agent uid, or why it has none.
type Answer struct {
	Refused map[uint32]netpolicy.Refusals `json:"refused"`
	Error   string                        `json:"error,omitempty"`
}

// Encode is the answer for r, or for err when the counters could not be
// read.
func Encode(r map[uint32]netpolicy.Refusals, err error) []byte {
	a := Answer{Refused: r}
	switch {
	case err != nil:
		a = Answer{Error: err.Error()}
	case r == nil: // no table: no counters, which is not "no answer"
		a.Refused = map[uint32]netpolicy.Refusals{}
	}
	b, merr := json.Marshal(a)
	if merr != nil {
		panic(merr) // numbers and strings only
	}
	return b
}

// Decode reads an answer: the counters, or the reader's error.
func Decode(b []byte) (map[uint32]netpolicy.Refusals, error) {
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("the counters reader's answer is not JSON: %w", err)
	}
	if a.Error != "" {
		return nil, fmt.Errorf("the counters reader: %s", a.Error)
	}
	if a.Refused == nil {
		return nil, errors.New("the counters reader answered no counters and no error")
	}
	return a.Refused, nil
}

// Reader is what Serve reads: netpolicy.NFT in flockctl counters.
type Reader interface {
	Refused(ctx context.Context) (map[uint32]netpolicy.Refusals, error)
}

// Serve writes to w the answer of a peer: fw's counters when allowed(uid)
// says the peer's uid may have them, else a refusal. The error is what
// the reader's own log should say (a refused peer, a failed read, a
// write the peer did not wait for).
func Serve(ctx context.Context, w io.Writer, peer uint32, allowed func(uint32) bool, fw Reader) error {
	var r map[uint32]netpolicy.Refusals
	var err error
	if allowed(peer) {
		r, err = fw.Refused(ctx)
	} else {
		err = fmt.Errorf("uid %d may not read the firewall's counters (only root and flock.service's user)", peer)
	}
	if _, werr := w.Write(Encode(r, err)); werr != nil {
		return errors.Join(err, fmt.Errorf("writing the answer: %w", werr))
	}
	return err
}

// Client asks the reader behind Path. It is a netpolicy.Firewall's
// Refused, for a process without CAP_NET_ADMIN.
type Client struct {
	Path    string        // "" is SocketPath
	Timeout time.Duration // for the whole exchange; 0 is 3 s
}

// Refused connects, reads the one answer and decodes it.
func (c Client) Refused(ctx context.Context) (map[uint32]netpolicy.Refusals, error) {
	path, timeout := c.Path, c.Timeout
	if path == "" {
		path = SocketPath
	}
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("asking the firewall's counters at %s (flock-counters.socket; flockctl provision installs it): %w", path, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	b, err := io.ReadAll(io.LimitReader(conn, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("reading the firewall's counters from %s: %w", path, err)
	}
	if len(b) > maxAnswer {
		return nil, fmt.Errorf("reading the firewall's counters from %s: an answer over %d bytes", path, maxAnswer)
	}
	return Decode(b)
}
