package bus

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/flockrun/flock/wire"
)

// A lease is what the desk hands a worker with a task: the delivery's
// JetStream ack subject and a MAC binding it to the agent, so the worker
// can speak of that delivery and of nothing else, and no other agent can
// speak of it with the lease. The key lives in the store directory, so
// leases outlive a restart of the bus.

// leaseKeyFile holds the key, under StoreDir.
const leaseKeyFile = "lease.key"

const (
	leaseKeySize = 32
	leaseMACSize = 16
)

// loadLeaseKey reads dir's lease key, making it once (0600) if absent.
// A new key is written to a file of its own and synced before it is
// linked into place (a link fails where a key is already), and the
// directory synced after: a power cut leaves the key whole or absent,
// never a short file that would keep the bus from starting.
func loadLeaseKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, leaseKeyFile)
	got, err := os.ReadFile(path)
	if err == nil {
		if len(got) != leaseKeySize {
			return nil, fmt.Errorf("the lease key %s is %d bytes, not %d: remove it (leases of tasks in hand are lost, they are handed out again)", path, len(got), leaseKeySize)
		}
		return got, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the lease key: %w", err)
	}
	key := make([]byte, leaseKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("making the lease key: %w", err)
	}
	f, err := os.CreateTemp(dir, leaseKeyFile+".new-*")
	if err != nil {
		return nil, fmt.Errorf("writing the lease key: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.Write(key)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("writing the lease key %s: %w", path, werr)
	}
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return loadLeaseKey(dir) // made meanwhile by another start
	} else if err != nil {
		return nil, fmt.Errorf("putting the lease key in place: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("syncing %s after making the lease key: %w", dir, err)
	}
	return key, nil
}

// syncDir makes dir's entries (a file linked or renamed into it) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func leaseMAC(key []byte, agent int, ack string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strconv.Itoa(agent)))
	m.Write([]byte{0})
	m.Write([]byte(ack))
	return m.Sum(nil)[:leaseMACSize]
}

// makeLease is agent's lease of the delivery acked on ack.
func makeLease(key []byte, agent int, ack string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(ack)) + "." + enc.EncodeToString(leaseMAC(key, agent, ack))
}

// openLease is the ack subject of lease if it was made for agent;
// malformed says it could not be read at all.
func openLease(key []byte, agent int, lease string) (ack string, malformed bool, err error) {
	enc := base64.RawURLEncoding
	a, m, ok := strings.Cut(lease, ".")
	if !ok {
		return "", true, errors.New("a lease is <ack>.<mac>")
	}
	ackb, err1 := enc.DecodeString(a)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil {
		return "", true, errors.New("a lease is base64url")
	}
	if !hmac.Equal(mac, leaseMAC(key, agent, string(ackb))) {
		return "", false, fmt.Errorf("the lease was not made for agent %d", agent)
	}
	return string(ackb), false, nil
}

// delivery is what an ack subject says of one delivery of a task.
type delivery struct {
	consumer  string
	delivered uint64 // 1 the first time
	seq       uint64 // the task's place in the stream
}

// parseAck reads a JetStream ack subject of wire.TasksStream:
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>,
// or the form with a domain and account hash after $JS.ACK.
func parseAck(ack string) (delivery, error) {
	t := strings.Split(ack, ".")
	switch len(t) {
	case 9:
	case 11, 12:
		t = append(t[:2], t[4:]...)
	default:
		return delivery{}, fmt.Errorf("%q is not an ack subject", ack)
	}
	if t[0] != "$JS" || t[1] != "ACK" || t[2] != wire.TasksStream {
		return delivery{}, fmt.Errorf("%q is not an ack subject of %s", ack, wire.TasksStream)
	}
	d := delivery{consumer: t[3]}
	var err1, err2 error
	d.delivered, err1 = strconv.ParseUint(t[4], 10, 64)
	d.seq, err2 = strconv.ParseUint(t[5], 10, 64)
	if err1 != nil || err2 != nil {
		return delivery{}, fmt.Errorf("%q is not an ack subject", ack)
	}
	return d, nil
}
