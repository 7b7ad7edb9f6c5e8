package bus

// Tier: unit (no root). make bench's rows for the shares: a bystander's
// task round trip while one agent floods each of its shares (and all at
// once with a colluder), against the same round trip quiet, in one run;
// the bystander's tasks lost; a restarted agent's reconnect; the bus's
// heap; and what the caps cost, against the same users without them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/benchns"
	"github.com/flockrun/flock/test/benchrow"
	"github.com/flockrun/flock/wire"
)

// floodBench is the flock of BenchmarkShares: orchestrator 1 floods,
// monitor 3 colludes (both granted collude.>), worker 2 is the bystander,
// worker 4 is restarted; every agent at the default shares.
type floodBench struct {
	s   *Server
	ids identities
	op  *nats.Conn
	js  jetstream.JetStream
	res chan string // the bystander's results, by task id
	// cpu is each flooding agent's unit's CPU quota: the floods of one
	// agent, run at once, share it (benchns.Throttle).
	cpu map[int]*sync.Mutex
}

func newFloodBench(b *testing.B) *floodBench {
	ids := newIdentities(b, everyoneAnd4...)
	f := twoWorkers()
	for i := range f.Agents {
		a := &f.Agents[i]
		a.Shares = spec.Shares{Connections: spec.DefaultConnections, Tasks: spec.DefaultTaskShare, TaskBytes: spec.DefaultTaskBytes}
		if a.ID == 1 || a.ID == 3 {
			a.Subjects = spec.Subjects{Publish: []string{"collude.>"}, Subscribe: []string{"collude.>"}}
		}
	}
	c := ForFlock(f, ids.keys())
	c.MaxSubscriptions, c.MaxPending = spec.DefaultMaxSubscriptions, spec.DefaultMaxPending
	fb := &floodBench{s: startBus(b, c, Options{}), ids: ids, res: make(chan string, 1024), cpu: map[int]*sync.Mutex{1: {}, 3: {}}}
	echo := func(_ context.Context, t agent.Task) wire.Result {
		return wire.Result{OK: true, Output: string(t.Payload)}
	}
	env := agent.Env{ID: 2, Role: "worker", NATSURL: fb.s.ClientURL(), NKeyFile: seedFile(b, ids, "flock-2"), Heartbeat: time.Second}
	a, err := agent.Connect(context.Background(), env, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.ServeTasks(ctx, "worker", echo); close(done) }()
	b.Cleanup(func() { cancel(); <-done; _ = a.Close() })
	fb.op = connect(b, fb.s, ids, creds.OperatorName).Conn
	if fb.js, err = jetstream.New(fb.op); err != nil {
		b.Fatal(err)
	}
	if _, err := fb.op.Subscribe(wire.ResultSubject, func(m *nats.Msg) {
		if r, err := wire.ParseResult(m.Header, m.Data); err == nil {
			fb.res <- r.TaskID
		}
	}); err != nil {
		b.Fatal(err)
	}
	return fb
}

// roundTrips sends n tasks to the bystander one after another, as
// flockctl send does, and times each to its result; lost are those with
// no result within 10 s.
func (fb *floodBench) roundTrips(b *testing.B, tag string, n int) (took []time.Duration, lost int) {
	for i := range n {
		id := fmt.Sprintf("%s-%d-%d", tag, time.Now().UnixNano(), i)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msg := nats.NewMsg(wire.AgentTasks(2))
		msg.Header.Set(wire.TaskIDHeader, id)
		msg.Header.Set(wire.MsgIDHeader, id)
		msg.Data = []byte("ping")
		_, err := fb.js.PublishMsg(ctx, msg)
	wait:
		for err == nil {
			select {
			case got := <-fb.res:
				if got == id { // an earlier task's late result is not this one's
					took = append(took, time.Since(start))
					break wait
				}
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		cancel()
		if err != nil {
			lost++
		}
	}
	return took, lost
}

// dialAs connects as agent id, from a socket of its uid when the
// benchmark runs firewalled (benchns).
func (fb *floodBench) dialAs(id int) (*client, error) {
	return dial(fb.s, fb.ids, fmt.Sprintf("flock-%d", id), nats.SetCustomDialer(&benchns.Dialer{UID: benchns.UID(id)}))
}

// firewall puts flock's table for agents 1-4 in force in the benchmark's
// namespace, at the default send and connect rates.
func (fb *floodBench) firewall(b *testing.B) {
	u, err := url.Parse(fb.s.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	p := netpolicy.Policy{BusHost: netip.MustParseAddr(u.Hostname()), BusPort: uint16(port),
		SendRate: spec.DefaultSendRate, ConnectRate: spec.DefaultConnectRate}
	for id := 1; id <= 4; id++ {
		p.AgentUIDs = append(p.AgentUIDs, benchns.UID(id))
	}
	benchns.Apply(b, p)
}

// reconnect is agent 4 restarted: its connection closed and a new one
// made, timed from the close to the new one's first round trip.
func (fb *floodBench) reconnect(b *testing.B, old *client) (*client, time.Duration) {
	start := time.Now()
	old.Close()
	for {
		c, err := fb.dialAs(4)
		if err == nil && c.Flush() == nil {
			return c, time.Since(start)
		}
		if time.Since(start) > 10*time.Second {
			b.Fatalf("agent 4 could not reconnect: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A flood runs until stop, as agent 1 (and 3, colluding).
type benchFlood struct {
	name string
	run  func(fb *floodBench, stop <-chan struct{})
}

var benchFloods = []benchFlood{
	{"a connections flood", floodConnections},
	{"a subscriptions flood", floodSubscriptions},
	{"a slow consumer fed by a colluder", floodSlow},
	{"a flood of maximum-size messages", floodBig},
	{"a tasks flood", floodTasks},
}

// floodConnections holds agent 1's share and tries one more, over and over.
func floodConnections(fb *floodBench, stop <-chan struct{}) {
	var held []*client
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	th := benchns.Throttle{Agent: fb.cpu[1]}
	defer th.Stop()
	for !stopped(stop) {
		th.Step()
		c, err := fb.dialAs(1)
		if err == nil {
			held = append(held, c)
		}
	}
}

// floodSubscriptions fills one of agent 1's connections with
// subscriptions, and tries one more, over and over (unsubscribed on the
// client's side each time: nats.go keeps a refused one).
func floodSubscriptions(fb *floodBench, stop <-chan struct{}) {
	c, err := fb.dialAs(1)
	if err != nil {
		return
	}
	defer c.Close()
	for i := range spec.DefaultMaxSubscriptions {
		c.Subscribe(wire.Inbox(1)+".flood."+strconv.Itoa(i), func(*nats.Msg) {})
	}
	th := benchns.Throttle{Agent: fb.cpu[1]}
	defer th.Stop()
	for !stopped(stop) {
		th.Step()
		if sub, err := c.Subscribe(wire.Inbox(1)+".flood.more", func(*nats.Msg) {}); err == nil {
			c.Flush()
			sub.Unsubscribe()
		}
	}
}

// floodSlow has agent 1 read nothing of what agent 3 publishes at it, as
// fast as it can; a reader cut connects again.
func floodSlow(fb *floodBench, stop <-chan struct{}) {
	pub, err := fb.dialAs(3)
	if err != nil {
		return
	}
	defer pub.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stopped(stop) {
			if c := rawSub(fb, "collude.slow"); c != nil {
				select {
				case <-stop:
				case <-time.After(2 * time.Second):
				}
				c.Close()
			}
		}
	}()
	big := bytes.Repeat([]byte("x"), 1<<20)
	th := benchns.Throttle{Agent: fb.cpu[3]}
	defer th.Stop()
	for !stopped(stop) {
		th.Step()
		pub.Publish("collude.slow", big)
	}
	wg.Wait()
}

// rawSub is agent 1 subscribed to subject over a socket it never reads.
func rawSub(fb *floodBench, subject string) net.Conn {
	c, err := benchns.DialAs(benchns.UID(1), &net.Dialer{}, "tcp", strings.TrimPrefix(fb.s.ClientURL(), "nats://"))
	if err != nil {
		return nil
	}
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	nonce := line[strings.Index(line, `"nonce":"`)+9:]
	nonce = nonce[:strings.Index(nonce, `"`)]
	kp := fb.ids["flock-1"]
	sig, _ := kp.Sign([]byte(nonce))
	pub, _ := kp.PublicKey()
	fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"nkey\":%q,\"sig\":%q,\"protocol\":1}\r\nSUB %s 1\r\nPING\r\n", pub, base64.RawURLEncoding.EncodeToString(sig), subject)
	return c
}

// floodBig publishes messages just under the largest on agent 1's own
// subject, heard by agent 3, as fast as it can.
func floodBig(fb *floodBench, stop <-chan struct{}) {
	pub, err := fb.dialAs(1)
	if err != nil {
		return
	}
	defer pub.Close()
	sub, err := fb.dialAs(3)
	if err != nil {
		return
	}
	defer sub.Close()
	sub.Subscribe("collude.big", func(*nats.Msg) {})
	sub.Flush()
	big := bytes.Repeat([]byte("x"), MaxPayload-1024)
	th := benchns.Throttle{Agent: fb.cpu[1]}
	defer th.Stop()
	for !stopped(stop) {
		th.Step()
		pub.Publish("collude.big", big)
	}
}

// floodTasks sends tasks through the desk as fast as the desk answers,
// refused once the share is full.
func floodTasks(fb *floodBench, stop <-chan struct{}) {
	c, err := fb.dialAs(1)
	if err != nil {
		return
	}
	defer c.Close()
	payload := make([]byte, 4096)
	th := benchns.Throttle{Agent: fb.cpu[1]}
	defer th.Stop()
	for !stopped(stop) {
		th.Step()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		agent.SendTask(ctx, c.Conn, 1, "tasks.flood", "", payload)
		cancel()
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// BenchmarkShares: see the file's comment.
func BenchmarkShares(b *testing.B) {
	if !benchns.Enter(b, "BenchmarkShares") {
		return
	}
	// 200 tasks a measure in the short form too: the p99 of fewer is
	// their slowest, one hiccup of the machine's.
	n := 200
	fb := newFloodBench(b)
	fb.firewall(b)
	fb.roundTrips(b, "warm", 20)
	restarted, err := fb.dialAs(4)
	if err != nil {
		b.Fatal(err)
	}
	all := append(slices.Clone(benchFloods), benchFlood{"every flood at once, with a colluder", func(fb *floodBench, stop <-chan struct{}) {
		var wg sync.WaitGroup
		for _, f := range benchFloods {
			wg.Add(1)
			go func() { defer wg.Done(); f.run(fb, stop) }()
		}
		wg.Wait()
	}})
	type figures struct{ p99, quiet, lost, reconnect []float64 }
	got := map[string]*figures{}
	for range benchrow.Reps(3) {
		for _, f := range all {
			fg := got[f.name]
			if fg == nil {
				fg = &figures{}
				got[f.name] = fg
			}
			quiet, _ := fb.roundTrips(b, "quiet", n)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { f.run(fb, stop); close(done) }()
			time.Sleep(500 * time.Millisecond) // the flood under way
			took, lost := fb.roundTrips(b, "flood", n)
			var back time.Duration
			restarted, back = fb.reconnect(b, restarted)
			close(stop)
			<-done
			purgeFlood(b, fb)
			fg.p99 = append(fg.p99, ms99(took))
			fg.quiet = append(fg.quiet, ms99(quiet))
			fg.lost = append(fg.lost, float64(lost))
			fg.reconnect = append(fg.reconnect, float64(back.Microseconds())/1000)
		}
	}
	note := "one process: the bus, the bystander (flock-agent's task loop), the flooders, each flooding agent (all its floods together) held to half a core as its unit's default CPUQuota holds it; the operator sends one task at a time, as flockctl send"
	if benchns.Firewalled() {
		note += "; flock's firewall in force (a network namespace of the benchmark's own), the flooders' and agent 4's sockets their uids', held to the default send and connect rates"
	} else {
		note += "; NOT firewalled (not root): the kernel's send and connect rates are not in force"
	}
	for _, f := range all {
		fg := got[f.name]
		benchrow.Print(b, benchrow.Row{Group: "tasks", What: "a bystander's task round trip p99, during " + f.name, Floor: "the same, quiet, just before",
			Unit: "ms", Flock: fg.p99, Base: fg.quiet, Goal: "≤ 2x", Note: note})
		benchrow.Print(b, benchrow.Row{Group: "tasks", What: "the bystander's tasks lost, during " + f.name, Unit: "tasks", Flock: fg.lost, Goal: "0"})
		benchrow.Print(b, benchrow.Row{Group: "bus", What: "a restarted agent's reconnect, during " + f.name, Unit: "ms", Flock: fg.reconnect, Goal: "≤ 1000 ms"})
	}
}

// purgeFlood removes the tasks flood's tasks, which no worker takes.
func purgeFlood(b *testing.B, fb *floodBench) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := fb.js.Stream(ctx, wire.TasksStream)
	if err == nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject("tasks.flood"))
	}
	if err != nil {
		b.Fatalf("purging the flood's tasks: %v", err)
	}
}

func ms99(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[min(len(d)-1, len(d)*99/100)].Microseconds()) / 1000
}

// BenchmarkCaps is what the caps cost: connecting (the gate's signature
// check and count) and a round trip (broadcast, heard, answered on events)
// on flock's bus, against nats-server with the same users and permissions
// and its own nkey check, no shares, in the same run.
func BenchmarkCaps(b *testing.B) {
	ids := newIdentities(b, everyone...)
	capped := startBus(b, ForFlock(sharedFlock(spec.DefaultConnections), ids.keys()), Options{})
	url := uncappedServer(b, capped)
	dialTo := func(u, name string) *nats.Conn {
		kp := ids[name]
		pub, _ := kp.PublicKey()
		nc, err := nats.Connect(u, nats.Nkey(pub, kp.Sign), nats.NoReconnect(), nats.CustomInboxPrefix(wire.Inbox(1)))
		if err != nil {
			b.Fatal(err)
		}
		return nc
	}
	urls := [2]string{capped.ClientURL(), url}
	var connect, rtt [2][]float64
	n := amount(2000) / 10
	for range benchrow.Reps(5) {
		for i, u := range urls {
			var took []time.Duration
			for range n {
				start := time.Now()
				nc := dialTo(u, "flock-2")
				nc.Flush()
				took = append(took, time.Since(start))
				nc.Close()
			}
			slices.Sort(took)
			connect[i] = append(connect[i], float64(took[len(took)/2].Microseconds()))
			orch, worker := dialTo(u, "flock-1"), dialTo(u, "flock-2")
			heard := make(chan struct{}, 1)
			orch.Subscribe(wire.Events(2), func(*nats.Msg) { heard <- struct{}{} })
			worker.Subscribe(wire.Broadcast, func(*nats.Msg) { worker.Publish(wire.Events(2), []byte("pong")) })
			orch.Flush()
			worker.Flush()
			var rt []time.Duration
			for range n {
				start := time.Now()
				orch.Publish(wire.Broadcast, []byte("ping"))
				<-heard
				rt = append(rt, time.Since(start))
			}
			slices.Sort(rt)
			rtt[i] = append(rtt[i], float64(rt[len(rt)/2].Microseconds()))
			orch.Close()
			worker.Close()
		}
	}
	note := "the floor: nats-server with flock's users and permissions, its own nkey check, no shares (max_subscriptions, max_pending, the gate's count)"
	benchrow.Print(b, benchrow.Row{Group: "bus", What: "connect and authenticate, p50", Floor: "without the caps", Unit: "µs", Flock: connect[0], Base: connect[1], Goal: "within noise", Note: note})
	benchrow.Print(b, benchrow.Row{Group: "bus", What: "round trip (broadcast, answered on events), p50", Floor: "without the caps", Unit: "µs", Flock: rtt[0], Base: rtt[1], Goal: "within noise", Note: note})
}

// uncappedServer is nats-server with s's users, as nats-server itself
// checks nkeys, without the bus's bounds.
func uncappedServer(b *testing.B, s *Server) string {
	s.mu.Lock()
	c := s.cfg
	s.mu.Unlock()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, MaxPayload: MaxPayload, Nkeys: s.nkeyUsers(c)})
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("the uncapped server is not ready")
	}
	return ns.ClientURL()
}
