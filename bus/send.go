package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// sendTimeout bounds waiting for JetStream's answer to a task the desk
// stores; past it the sender is told to try again (its id keeps a second
// copy out).
const sendTimeout = 10 * time.Second

// deskSent is where JetStream answers the tasks the desk stores.
func (d *desk) deskSent() string { return d.s.inbox + ".sent." }

// sending is a task the desk stored and awaits JetStream's answer for.
type sending struct {
	agent int
	reply string
	size  int64
	timer *time.Timer
}

// onSend takes an orchestrator's task: within its share of TASKS it is
// stored there (on the subject it names, with the sender in
// wire.SenderHeader), and the answer is JetStream's; over its share it is
// refused at once, and counted. The store is asked without waiting, so a
// sender whose tasks are slow to store holds up no one else's.
func (d *desk) onSend(m *nats.Msg) {
	agent, _, ok := wire.DeskRequest(m.Subject)
	if !ok || !d.s.local(agent) || !d.ownReply(agent, m) {
		return
	}
	maxN, maxBytes := d.s.taskShare(agent)
	if maxN == 0 {
		d.refuse(agent, m, wire.RefusedNotSender, fmt.Sprintf("agent %d may not send tasks: only orchestrators do", agent))
		return
	}
	subject, h, err := wire.ParseSend(m.Header)
	if err == nil {
		// A budget the workers could not read would let the task run
		// unbounded: refused here, where its sender hears why.
		_, err = wire.TaskBudgetOf(h)
	}
	if err != nil {
		d.refuse(agent, m, wire.RefusedMalformed, err.Error())
		return
	}
	if !d.s.ready.Load() {
		d.refuse(agent, m, wire.RefusedUnavailable, errNotReady.Error())
		return
	}
	h[wire.SenderHeader] = []string{strconv.Itoa(agent)}
	size := taskSize(subject, h, m.Data)
	if u, ok := d.s.shares.reserve(agent, size, maxN, maxBytes); !ok {
		if d.recount() {
			u, ok = d.s.shares.reserve(agent, size, maxN, maxBytes)
		}
		if !ok {
			d.refuse(agent, m, wire.RefusedOverShare, fmt.Sprintf(
				"agent %d has %d tasks of %d bytes in %s, its share is %d tasks and %d bytes (shares.tasks, shares.task_bytes); this one is %d bytes: send it once some are done",
				agent, u.n, u.bytes, wire.TasksStream, maxN, maxBytes, size))
			return
		}
	}
	d.mu.Lock()
	d.token++
	tok := strconv.FormatUint(d.token, 10)
	sd := &sending{agent: agent, reply: m.Reply, size: size}
	sd.timer = time.AfterFunc(sendTimeout, func() {
		if d.takeSending(tok) != nil {
			d.s.shares.release(agent, size)
			d.refuse(agent, m, wire.RefusedUnavailable, fmt.Sprintf("%s did not confirm the task within %s; send it again (its id keeps a second copy out)", wire.TasksStream, sendTimeout))
		}
	})
	d.sending[tok] = sd
	d.mu.Unlock()
	if err := d.s.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: d.deskSent() + tok, Header: h, Data: m.Data}); err != nil {
		if d.takeSending(tok) != nil {
			sd.timer.Stop()
			d.s.shares.release(agent, size)
			d.refuse(agent, m, wire.RefusedUnavailable, "storing the task: "+err.Error())
		}
	}
}

// recount looks at the stream once a second at most when an agent is at
// its share: tasks removed without the bus (a purge) no longer count.
func (d *desk) recount() bool {
	d.mu.Lock()
	if time.Since(d.recounted) < time.Second {
		d.mu.Unlock()
		return false
	}
	d.recounted = time.Now()
	d.mu.Unlock()
	req, err := d.s.nc.Request("$JS.API.STREAM.INFO."+wire.TasksStream, nil, 2*time.Second)
	if err != nil {
		return false
	}
	var info struct {
		State struct {
			FirstSeq uint64 `json:"first_seq"`
		} `json:"state"`
	}
	if json.Unmarshal(req.Data, &info) != nil || info.State.FirstSeq == 0 {
		return false
	}
	d.s.shares.before(info.State.FirstSeq)
	return true
}

func (d *desk) takeSending(tok string) *sending {
	d.mu.Lock()
	defer d.mu.Unlock()
	sd := d.sending[tok]
	delete(d.sending, tok)
	return sd
}

// pubAck is JetStream's answer to a publish into a stream.
type pubAck struct {
	wire.Sent
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
}

// errStreamFull is JetStream's answer to a message over the stream's
// bound (JSStreamStoreFailedF's "maximum bytes exceeded").
const errStreamFull = "maximum bytes exceeded"

// onSent takes JetStream's answer to a task the desk stored and answers
// its sender.
func (d *desk) onSent(m *nats.Msg) {
	sd := d.takeSending(strings.TrimPrefix(m.Subject, d.deskSent()))
	if sd == nil {
		return // answered already: the timer went off
	}
	sd.timer.Stop()
	var ack pubAck
	if err := json.Unmarshal(m.Data, &ack); err != nil || (ack.Error == nil && ack.Seq == 0) {
		if status := m.Header.Get("Status"); status == "503" {
			err = errors.New("no stream answered")
		}
		d.s.shares.release(sd.agent, sd.size)
		d.answer(sd.reply, wire.RefusalMessage(wire.Refusal{Kind: wire.RefusedUnavailable, Reason: fmt.Sprintf("storing the task: %v (%q)", err, m.Data)}), nil)
		return
	}
	if ack.Error != nil {
		d.s.shares.release(sd.agent, sd.size)
		kind := wire.RefusedUnavailable
		if strings.Contains(ack.Error.Description, errStreamFull) {
			kind = wire.RefusedFull
		}
		d.answer(sd.reply, wire.RefusalMessage(wire.Refusal{Kind: kind, Reason: "storing the task: " + ack.Error.Description}), nil)
		return
	}
	if ack.Duplicate {
		d.s.shares.release(sd.agent, sd.size)
	} else {
		d.s.shares.stored(ack.Seq, sd.agent, sd.size)
	}
	body, _ := wire.EncodeSent(ack.Sent)
	d.answer(sd.reply, nil, body)
}

// taskShare is agent's share of TASKS: 0 tasks if it may not send.
func (s *Server) taskShare(agent int) (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.cfg.Users {
		if u.Agent == agent {
			return u.Tasks, u.TaskBytes
		}
	}
	return 0, 0
}
