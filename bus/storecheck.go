package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/store"
	"github.com/flockrun/flock/wire"
)

// lookAtStore runs before the server starts: it reads the store as the
// server would not (store.Check), and keeps what the server would cut
// short or could not start with (store.SetAside), so that nothing in it
// is lost unseen. What it found is told once the streams are back, with
// what was put back (putBack).
func (s *Server) lookAtStore(now time.Time) {
	r, err := store.Check(s.opts.StoreDir)
	if err != nil {
		s.log.Errorf("checking the store before the server reads it: %v (the server's own recovery follows)", err)
		return
	}
	for _, st := range r.Streams {
		for _, n := range st.Notes {
			s.log.Noticef("store: stream %s: %s", st.Name, n)
		}
	}
	if !r.Damaged() {
		return
	}
	aside, err := store.SetAside(s.opts.StoreDir, r, store.Stamp(now))
	if err != nil {
		s.log.Errorf("setting the damaged store files aside: %v; the server cuts what fails its checksum, and what proved itself past it is lost", err)
		for _, p := range r.Problems() {
			s.tellDamage(wire.StoreProblem{Stream: p.Stream, File: p.File, What: p.What, LostBytes: p.LostBytes}, "")
		}
		return
	}
	if aside == "" { // nothing to keep, nothing to put back: told now
		for _, p := range r.Problems() {
			s.tellDamage(wire.StoreProblem{Stream: p.Stream, File: p.File, What: p.What, LostBytes: p.LostBytes}, "")
		}
		return
	}
	if s.cluster != nil {
		// Each stream has copies on other hosts, which JetStream brings
		// this one's back from: nothing is put back from here.
		s.log.Noticef("store: on several hosts the other hosts' copies restore this one's; nothing is put back from %s", aside)
		if err := store.MarkSalvaged(aside, salvage{Time: now}); err != nil {
			s.log.Errorf("%v", err)
		}
		s.tellSalvage(aside, salvage{})
	}
}

// serverLosses tells what the server found missing as it read the
// store (a block file its index names): those messages are gone, and
// only its log line said so.
func (s *Server) serverLosses() {
	for _, line := range s.log.takeLost() {
		stream := "?"
		if m := filestoreOf.FindStringSubmatch(line); m != nil {
			stream = m[1]
		}
		s.tellDamage(wire.StoreProblem{Stream: stream,
			What: "a block file the stream's index names is missing: its messages are gone (the server: " + line + ")"}, "")
	}
}

// filestoreOf reads the stream's name from a line of the server's file
// store.
var filestoreOf = regexp.MustCompile(`^Filestore \[([^\]]+)\] `)

// salvage is what putBack did with one tree set aside: its
// salvaged.json.
type salvage struct {
	Time    time.Time              `json:"time"`
	Streams map[string]*salvageOut `json:"streams"`
}

// salvageOut is one stream's part.
type salvageOut struct {
	Proven  int      `json:"proven"`          // messages in the tree aside that proved themselves
	Present int      `json:"present"`         // already in the stream
	Done    int      `json:"done,omitempty"`  // tasks with a stored result: not queued again
	Stale   int      `json:"stale,omitempty"` // results and dead letters past their age
	PutBack []string `json:"put_back"`        // ids put back, in their order
}

// salvaged streams, in the order they are put back: a task whose result
// is put back is not queued again.
var salvaged = []string{wire.ResultsStream, wire.DeadStream, wire.TasksStream}

// putBack puts back, from each tree set aside and not salvaged yet (by
// lookAtStore, or by flockctl store quarantine), every message that
// proves itself and that the streams do not have: results and dead
// letters within their age, then the tasks without a result. It marks the
// tree salvaged, and tells what the store lost and what it kept. A tree it
// could not finish is tried again at the next start (what is put back is
// looked up first, so nothing goes in twice).
func (s *Server) putBack(ctx context.Context) {
	pending, err := store.Pending(s.opts.StoreDir)
	if err != nil {
		s.log.Errorf("looking for store files set aside: %v", err)
		return
	}
	for _, aside := range pending {
		out, err := s.salvage(ctx, aside)
		if err != nil {
			s.log.Errorf("putting back what proved itself in %s: %v; tried again at the next start", aside, err)
			continue
		}
		if err := store.MarkSalvaged(aside, out); err != nil {
			s.log.Errorf("%v", err)
		}
		s.tellSalvage(aside, out)
	}
	if len(pending) == 0 {
		return
	}
	// The tasks put back carry their senders (wire.SenderHeader): they
	// count against their shares as before the damage.
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	seqs, err := s.readTaskShares(ctx)
	if err != nil {
		s.log.Errorf("counting the shares of the tasks put back: %v", err)
		return
	}
	s.shares.load(seqs)
}

func (s *Server) salvage(ctx context.Context, aside string) (salvage, error) {
	out := salvage{Time: time.Now(), Streams: map[string]*salvageOut{}}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	have := map[string]map[string]bool{}
	for _, name := range salvaged {
		ids, err := s.idsIn(ctx, name)
		if err != nil {
			return out, err
		}
		have[name] = ids
	}
	for _, name := range salvaged {
		msgs, err := store.Read(aside, name)
		if err != nil {
			return out, err
		}
		o := &salvageOut{Proven: len(msgs), PutBack: []string{}}
		out.Streams[name] = o
		for _, m := range msgs {
			id := wire.TaskID(m.Header, m.Seq)
			switch {
			case have[name][id]:
				o.Present++
				continue
			case name == wire.TasksStream && have[wire.ResultsStream][id]:
				o.Done++
				continue
			case name == wire.ResultsStream && time.Since(m.Time) > ResultsMaxAge, name == wire.DeadStream && time.Since(m.Time) > DeadMaxAge:
				o.Stale++
				continue
			}
			h := m.Header
			if h == nil {
				h = nats.Header{}
			}
			if name == wire.TasksStream && h.Get(wire.TaskIDHeader) == "" {
				h.Set(wire.TaskIDHeader, id) // its id was its place in the stream: keep it
			}
			if _, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Header: h, Data: m.Data}); err != nil {
				return out, fmt.Errorf("putting %s %s back: %w", name, id, err)
			}
			have[name][id] = true
			o.PutBack = append(o.PutBack, id)
		}
	}
	return out, nil
}

// idsIn are the task ids of every message in stream name: a work queue
// (TASKS) read message by message (it takes no second consumer), the
// others with an ordered consumer of headers only.
func (s *Server) idsIn(ctx context.Context, name string) (map[string]bool, error) {
	ids := map[string]bool{}
	st, err := s.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	if info.State.Msgs == 0 {
		return ids, nil
	}
	if info.Config.Retention == jetstream.WorkQueuePolicy {
		for seq := info.State.FirstSeq; ; {
			raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return ids, nil
			}
			if err != nil {
				return nil, fmt.Errorf("reading stream %s at %d: %w", name, seq, err)
			}
			ids[wire.TaskID(raw.Header, raw.Sequence)] = true
			seq = raw.Sequence + 1
		}
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", name, err)
	}
	for {
		batch, err := c.Fetch(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		n, last := 0, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			ids[wire.TaskID(m.Headers(), md.Sequence.Stream)] = true
			last = md.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		if last || n == 0 {
			return ids, nil
		}
	}
}

// tellSalvage says, for a tree set aside, what was wrong (its
// report.json) and what was put back: a line in the journal and a
// store-damaged event per problem, and the bus's status.
func (s *Server) tellSalvage(aside string, out salvage) {
	var r store.Report
	if b, err := os.ReadFile(filepath.Join(aside, store.ReportFile)); err == nil {
		_ = json.Unmarshal(b, &r)
	}
	if r.Why == store.WhyUnclustered { // nothing is damaged: told as moved
		var n []string
		for _, name := range salvaged {
			if o := out.Streams[name]; o != nil {
				n = append(n, fmt.Sprintf("%d of %d %s", len(o.PutBack), o.Proven, name))
			}
		}
		s.log.Noticef("store: the store this host's bus made alone (kept in %s) is in the cluster's streams: put there %s (the rest were there, or done)",
			aside, strings.Join(n, ", "))
		return
	}
	problems := r.Problems()
	if len(problems) == 0 { // a store set aside whole, by the operator
		problems = []store.Problem{{Stream: "*", What: "the store was set aside (flockctl store quarantine)"}}
	}
	for i, p := range problems {
		sp := wire.StoreProblem{Stream: p.Stream, File: p.File, What: p.What, LostBytes: p.LostBytes}
		// What was put back is told once, with the first problem of
		// each stream (or of the whole store).
		for _, name := range salvaged {
			o := out.Streams[name]
			if o == nil || (p.Stream != name && p.Stream != "*") || firstOf(problems, i) != i {
				continue
			}
			sp.PutBack += len(o.PutBack)
		}
		s.tellDamage(sp, aside)
	}
	for _, name := range salvaged {
		if o := out.Streams[name]; o != nil && len(o.PutBack) > 0 {
			s.log.Noticef("store: put back %d of %s from %s: %s", len(o.PutBack), name, aside, someIDs(o.PutBack, 20))
		}
	}
}

// firstOf is the index of the first problem of the same stream as
// problems[i].
func firstOf(problems []store.Problem, i int) int {
	return slices.IndexFunc(problems, func(p store.Problem) bool { return p.Stream == problems[i].Stream })
}

// tellDamage writes one problem to the journal as a store-damaged event
// and keeps it for the status.
func (s *Server) tellDamage(p wire.StoreProblem, aside string) {
	p.Aside = aside
	var b strings.Builder
	fmt.Fprintf(&b, "store: stream %s", p.Stream)
	if p.File != "" {
		fmt.Fprintf(&b, ", %s", p.File)
	}
	fmt.Fprintf(&b, ": %s", p.What)
	if p.PutBack > 0 {
		fmt.Fprintf(&b, "; %d messages that proved themselves are put back", p.PutBack)
	}
	if aside != "" {
		fmt.Fprintf(&b, "; the damaged files are kept in %s", aside)
	}
	extra := map[string]string{"STREAM": p.Stream, "PUT_BACK": strconv.Itoa(p.PutBack), "LOST_BYTES": strconv.Itoa(p.LostBytes)}
	if aside != "" {
		extra["ASIDE"] = aside
	}
	s.log.record("[ERR]", b.String(), events.Record{Kind: events.StoreDamaged, Detail: b.String(), Extra: extra})
	s.mu.Lock()
	s.storeProblems = append(s.storeProblems, p)
	s.mu.Unlock()
}

// someIDs names at most n ids and counts the rest.
func someIDs(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, " ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], " "), len(ids)-n)
}
