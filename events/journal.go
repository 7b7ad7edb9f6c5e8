package events

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// JournalSource reads the system journal through journalctl (flockctl is
// built without cgo, so not through libsystemd): `journalctl -o json` with
// matches that select systemd's messages about units, flock's records,
// the proxy's denials and the kernel's lines; Map and fold do the rest.
type JournalSource struct {
	UIDBase uint32
	Wall    WallOf // nil: a death is failed, never wall-killed
	// Command runs journalctl (nil: exec.CommandContext).
	Command func(ctx context.Context, name string, args ...string) *exec.Cmd

	fold   *fold
	cursor string // of the last entry History read
	since  time.Time
}

// matches are journalctl's: terms of one field are ORed, of different
// fields ANDed, "+" ORs groups.
func matches() []string {
	var m []string
	for _, id := range SystemdMessageIDs {
		m = append(m, "MESSAGE_ID="+id)
	}
	m = append(m, "_PID=1", "+")
	for _, k := range []Kind{BusViolation, DeadLettered, StoreDamaged, DriftFound, DriftRepaired} {
		m = append(m, FieldEvent+"="+string(k))
	}
	return append(m, "+", "_SYSTEMD_UNIT="+proxyUnit, "DECISION=deny", "+", "_TRANSPORT=kernel")
}

func (j *JournalSource) command(ctx context.Context, args ...string) *exec.Cmd {
	args = append([]string{"--no-pager", "--quiet", "-o", "json"}, append(args, matches()...)...)
	if j.Command != nil {
		return j.Command(ctx, "journalctl", args...)
	}
	return exec.CommandContext(ctx, "journalctl", args...)
}

// History is the journal's events since since.
func (j *JournalSource) History(ctx context.Context, since time.Time) ([]Event, error) {
	j.fold, j.since = newFold(j.Wall), since
	cmd := j.command(ctx, "--since", sinceArg(since))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("journalctl %s: %w: %s", strings.Join(cmd.Args[1:], " "), err, strings.TrimSpace(stderr.String()))
	}
	var evs []Event
	err = j.read(bytes.NewReader(out), func(e Event) error { evs = append(evs, e); return nil })
	return evs, err
}

// Follow runs journalctl --follow from where History stopped.
func (j *JournalSource) Follow(ctx context.Context, out chan<- Event) error {
	if j.fold == nil {
		j.fold = newFold(j.Wall)
	}
	from := []string{"--since", sinceArg(j.since)}
	if j.cursor != "" {
		from = []string{"--after-cursor", j.cursor}
	}
	cmd := j.command(ctx, append([]string{"--follow"}, from...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("journalctl --follow: %w", err)
	}
	rerr := j.read(pipe, func(e Event) error {
		select {
		case out <- e:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(rerr, fmt.Errorf("journalctl --follow ended: %v: %s", werr, strings.TrimSpace(stderr.String())))
}

// read maps each entry of r and passes on the events.
func (j *JournalSource) read(r io.Reader, emit func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		e, err := ParseEntry(sc.Bytes())
		if err != nil {
			return err
		}
		if c := e["__CURSOR"]; c != "" {
			j.cursor = c
		}
		m, ok := Map(e, j.UIDBase)
		if !ok {
			continue
		}
		if ev, ok := j.fold.next(m); ok {
			if err := emit(ev); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

// sinceArg is t as journalctl's --since reads it exactly: @ and Unix
// seconds with microseconds.
func sinceArg(t time.Time) string {
	us := t.UnixMicro()
	return "@" + strconv.FormatInt(us/1e6, 10) + "." + fmt.Sprintf("%06d", us%1e6)
}
