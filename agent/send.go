package agent

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/flockrun/flock/wire"
)

// SendTask hands payload to the flock as a task on subject (tasks.worker,
// or tasks.agent.N for agent N alone), through the bus's task desk, as
// agent id (an orchestrator) on nc, whose inbox prefix must be the
// agent's own (wire.Inbox). taskID names it and keeps a repeated send from
// storing it twice ("": none). It returns where the task is stored; a
// refusal is a *wire.Refusal (over the agent's share of TASKS: kind
// wire.RefusedOverShare, and the reason says the numbers).
func SendTask(ctx context.Context, nc *nats.Conn, id int, subject, taskID string, payload []byte) (wire.Sent, error) {
	m := nats.NewMsg(wire.Desk(id, wire.DeskSend))
	h, body := wire.SendMessage(subject, taskID, payload)
	for k, v := range h {
		m.Header[k] = v
	}
	m.Data = body
	ans, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return wire.Sent{}, fmt.Errorf("sending a task on %s: %w", subject, err)
	}
	if r := wire.ParseRefusal(ans.Header); r != nil {
		return wire.Sent{}, r
	}
	return wire.ParseSent(ans.Data)
}

// SendTask is SendTask on the agent's own connection.
func (a *Agent) SendTask(ctx context.Context, subject, taskID string, payload []byte) (wire.Sent, error) {
	return SendTask(ctx, a.nc, a.env.ID, subject, taskID, payload)
}
