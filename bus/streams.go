package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// setupTimeout bounds making the streams and consumers, at Start and at
// each Reload.
const setupTimeout = 30 * time.Second

// startTasks makes the streams and consumers c wants, then dead-letters
// the tasks that ran out of deliveries, those of before the start
// included.
func (s *Server) startTasks(ctx context.Context, c Config) error {
	if err := s.raiseStoreLimit(ctx, c); err != nil {
		return err
	}
	if err := s.ensureTasks(ctx, c); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	seqs, err := s.readTaskShares(ctx)
	if err != nil {
		return err
	}
	s.shares.load(seqs)
	return s.watchGivenUp(ctx)
}

// raiseStoreLimit lets streams made under a larger store_max shrink.
// JetStream refuses to change any stream while the streams reserve more
// than the server's bound, and a running server's bound may grow but not
// shrink: so the bound is raised to what they reserve, they shrink to
// store_max between them (ensureTasks), and the server keeps the larger
// bound until its next start, where it is store_max again. nats-server's
// reload closes every connection of a custom authentication (gate.go),
// the bus's own too, which reconnects: so only here, once, at the start
// after store_max was lowered.
func (s *Server) raiseStoreLimit(ctx context.Context, c Config) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	// In a cluster forming, the listing may name a stream more than once
	// (the server gathers it from every copy): each counts once. Counted
	// twice, it would raise the bound for nothing, and the reload closes
	// every client.
	bounds := map[string]int64{}
	streams := s.js.ListStreams(ctx)
	for si := range streams.Info() {
		if si.Config.Storage == jetstream.FileStorage && si.Config.MaxBytes > 0 {
			bounds[si.Config.Name] = si.Config.MaxBytes
		}
	}
	if err := streams.Err(); err != nil {
		return fmt.Errorf("listing the streams: %w", err)
	}
	var reserved int64
	for _, b := range bounds {
		reserved += b
	}
	// In a cluster this runs beside Reload, which reads storeLimit too.
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if reserved <= s.storeLimit {
		return nil
	}
	s.log.Noticef("store_max is now %d bytes, the streams were made for %d: they shrink now, the server's own bound at its next start", s.storeLimit, reserved)
	s.storeLimit = reserved
	so, err := s.serverOptions(c)
	if err != nil {
		return err
	}
	before, _ := s.nc.GetClientID()
	if err := s.ns.ReloadOptions(so); err != nil {
		return fmt.Errorf("raising the store's bound to %d bytes for the streams to shrink: %w", reserved, err)
	}
	// A request sent before the bus's own client saw its connection go
	// would be lost: go on once it is back.
	for s.ns.GetClient(before) == nil {
		if now, err := s.nc.GetClientID(); err == nil && now != before && s.nc.IsConnected() {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the bus's own client after raising the store's bound: %w", ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// ensureTasks creates or updates the three streams and the consumers of
// c's workers, and deletes the consumers of agents no longer in it. It is
// idempotent: Start and every Reload run it. A consumer that is already as
// wanted is left alone, so a reload that adds one agent to a thousand
// makes one consumer, not a thousand requests.
func (s *Server) ensureTasks(ctx context.Context, c Config) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	t := c.Tasks.withDefaults()
	for _, sc := range streamConfigs(t, c.replicas()) {
		if _, err := s.js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("creating or updating stream %s: %w", sc.Name, err)
		}
	}
	stream, err := s.js.Stream(ctx, wire.TasksStream)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", wire.TasksStream, err)
	}
	have := map[string]jetstream.ConsumerConfig{}
	infos := stream.ListConsumers(ctx)
	for info := range infos.Info() {
		have[info.Name] = info.Config
	}
	if err := infos.Err(); err != nil {
		return fmt.Errorf("listing the consumers of stream %s: %w", wire.TasksStream, err)
	}
	want := map[string]bool{}
	for _, cc := range consumerConfigs(t) {
		want[cc.Durable] = true
		if got, ok := have[cc.Durable]; ok && sameConsumer(got, cc) {
			continue
		}
		if _, err := stream.CreateOrUpdateConsumer(ctx, cc); err != nil {
			return fmt.Errorf("creating or updating consumer %s of stream %s: %w", cc.Durable, wire.TasksStream, err)
		}
	}
	for name := range have {
		if want[name] || !isAgentConsumer(name) {
			continue
		}
		// Its agent is gone; tasks addressed to it stay queued (flockctl
		// tasks shows them) until an agent of that id comes back.
		if err := stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("deleting consumer %s of a removed agent: %w", name, err)
		}
		s.log.Noticef("deleted task consumer %s: its agent left the flock", name)
	}
	return nil
}

// sameConsumer reports whether the server's consumer got is cc: the
// fields flock sets (the server fills in the rest).
func sameConsumer(got, cc jetstream.ConsumerConfig) bool {
	return got.Durable == cc.Durable && got.Description == cc.Description && got.FilterSubject == cc.FilterSubject &&
		got.DeliverPolicy == cc.DeliverPolicy && got.AckPolicy == cc.AckPolicy &&
		got.MaxDeliver == cc.MaxDeliver && got.AckWait == cc.AckWait
}

// isAgentConsumer reports whether name is one the bus made for an agent
// (agent-N); consumers it did not make are left alone.
func isAgentConsumer(name string) bool { return consumerAgent(name) > 0 }

// consumerAgent is the agent whose own queue consumer name is (agent-N),
// or 0 (the workers' shared queue, or one the bus did not make).
func consumerAgent(name string) int {
	n, ok := strings.CutPrefix(name, "agent-")
	if !ok {
		return 0
	}
	id, err := strconv.Atoi(n)
	if err != nil || wire.AgentConsumer(id) != name {
		return 0
	}
	return id
}

// streamConfigs are the bus's streams. The store is shared out so that
// the sum of the streams' bounds is the server's: tasks half, results
// three eighths, dead letters and the advisories naming them the rest. A
// full TASKS refuses new tasks (the sender hears it); full RESULTS and
// DEAD drop their oldest. Each has replicas copies, on as many hosts.
func streamConfigs(t Tasks, replicas int) []jetstream.StreamConfig {
	scs := []jetstream.StreamConfig{{
		Name:        wire.TasksStream,
		Description: "tasks waiting for a worker or running; a task leaves once its result is stored",
		Subjects:    []string{wire.TasksAll},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    t.StoreMax / 2,
		Duplicates:  wire.TaskDedupWindow,
	}, {
		Name:        wire.ResultsStream,
		Description: "one result per task",
		Subjects:    []string{wire.ResultSubject},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		MaxBytes:    t.StoreMax * 3 / 8,
		MaxAge:      ResultsMaxAge,
		Duplicates:  t.ResultWindow,
	}, {
		Name:        wire.DeadStream,
		Description: "tasks no worker finished within max_deliveries",
		Subjects:    []string{wire.DeadSubject},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		MaxBytes:    t.StoreMax * 7 / 64,
		MaxAge:      DeadMaxAge,
		Duplicates:  24 * time.Hour,
	}, {
		Name:        givenUpStream,
		Description: "the server's word that a task ran out of deliveries, kept until the bus dead-lettered it",
		Subjects:    []string{maxDeliveriesAdvisory},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    t.StoreMax / 64,
	}}
	for i := range scs {
		scs[i].Replicas = replicas
	}
	return scs
}

// consumerConfigs are the durable pull consumers of TASKS: one shared by
// every worker, one per worker for tasks addressed to it.
func consumerConfigs(t Tasks) []jetstream.ConsumerConfig {
	role := string(spec.RoleWorker)
	cs := []jetstream.ConsumerConfig{consumerConfig(wire.RoleConsumer(role), wire.RoleTasks(role), "tasks for any worker")}
	for _, id := range slices.Sorted(slices.Values(t.Workers)) {
		cs = append(cs, consumerConfig(wire.AgentConsumer(id), wire.AgentTasks(id), "tasks for agent "+strconv.Itoa(id)))
	}
	for i := range cs {
		cs[i].MaxDeliver, cs[i].AckWait = t.MaxDeliveries, t.AckWait
	}
	return cs
}

func consumerConfig(name, subject, what string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       name,
		Description:   what,
		FilterSubject: subject,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
	}
}
