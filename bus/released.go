package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A release must outlive a restart of the bus: JetStream does not record
// a NAK (the delivery stays pending, its count rises only when it is
// handed out again), so after a restart a released delivery and a held
// one look alike, and the worker that gave a task back could still store
// its result. The desk keeps the deliveries given back, and not handed
// out since, in StoreDir/released; loaded at start as released holdings.

// releasedFile holds them, under StoreDir.
const releasedFile = "released"

// releasedEntry is one delivery given back: its ack subject and task id.
type releasedEntry struct {
	Ack string `json:"ack"`
	ID  string `json:"id"`
}

func releasedPath(dir string) string { return filepath.Join(dir, releasedFile) }

// loadReleased puts the deliveries given back before a restart into held.
func loadReleased(path string, held map[uint64]*holding) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var l []releasedEntry
	if err == nil {
		err = json.Unmarshal(data, &l)
	}
	if err != nil {
		return fmt.Errorf("reading the tasks given back %s: %w (a worker that gave one back before the restart may still store its result)", path, err)
	}
	now := time.Now()
	for _, e := range l {
		dl, err := parseAck(e.Ack)
		if err != nil {
			continue
		}
		if h := held[dl.seq]; h == nil || h.delivered < dl.delivered {
			held[dl.seq] = &holding{ack: e.Ack, delivered: dl.delivered, id: e.ID, state: released, handed: now, at: now}
		}
	}
	return nil
}

// saveReleasedLocked writes the deliveries given back that the desk
// still knows of (pruning bounds them), atomically.
func (d *desk) saveReleasedLocked() error {
	l := []releasedEntry{}
	for _, h := range d.held {
		if h.state == released {
			l = append(l, releasedEntry{Ack: h.ack, ID: h.id})
		}
	}
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	path := releasedPath(d.s.opts.StoreDir)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing the tasks given back: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the tasks given back: %w", err)
	}
	return nil
}
