package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The cost of each task. A worker's model requests go through flock-proxy,
// which knows the worker by its socket's uid; the desk knows which tasks
// that worker holds. So every request made while a worker holds a task is
// charged to it: the proxy asks the desk on LeasesSubject which tasks the
// agent holds (TaskHeader chooses among several), keeps each task's spend
// with its counts, and the desk asks it on TaskSpendSubject for the spend
// it stores with the task's result.

// TaskHeader, on a model request, names the task (its id) the request is
// for, among those its agent holds. Not needed while it holds one; the
// gateway drops it before the provider sees the request.
const TaskHeader = "Flock-Task"

// TaskBudgetHeader, on a task, is its budget (TaskBudget.String): the
// most its requests may spend, beside its worker's task_budget (the
// smaller of each applies).
const TaskBudgetHeader = "Flock-Task-Budget"

// LeasesSubject is where flock-proxy asks the desk which tasks agent id
// holds (an empty body; the answer HeldTasks, the agent's alone). Only
// the bus hears it; only the proxy and the operator may ask.
func LeasesSubject(id int) string { return "flock.bus.leases." + strconv.Itoa(id) }

// LeasesSubjects matches every agent's LeasesSubject.
const LeasesSubjects = "flock.bus.leases.*"

// TaskSpendSubject is where the desk (or the operator) asks flock-proxy
// what a task of agent id has spent: the body a TaskSpendRequest, the
// answer a TaskSpend. Only the proxy hears it.
func TaskSpendSubject(id int) string { return "flock.proxy.spend." + strconv.Itoa(id) }

// TaskSpendSubjects matches every agent's TaskSpendSubject.
const TaskSpendSubjects = "flock.proxy.spend.*"

// ProxyInbox is the prefix of flock-proxy's reply subjects
// (nats.CustomInboxPrefix): its bus user hears its own answers, no one
// else's.
const ProxyInbox = "_INBOX.flock-proxy"

// ReaderInbox is the prefix of the reader's reply subjects (flockctl's
// read-only verbs run by a member of the readers' group): it hears its
// own answers, no agent's.
const ReaderInbox = "_INBOX.flock-reader"

// TaskBudget is the most a task's model requests may spend, in tokens
// (every kind counted, as the limits count them) or dollars; 0 sets no
// limit.
type TaskBudget struct {
	Tokens uint64  `json:"tokens,omitempty"`
	USD    PicoUSD `json:"usd,omitempty"`
}

// Any says whether b limits anything.
func (b TaskBudget) Any() bool { return b.Tokens > 0 || b.USD > 0 }

// Within is the budget that b and o both allow: the smaller of each
// limit either sets.
func (b TaskBudget) Within(o TaskBudget) TaskBudget {
	least := func(x, y uint64) uint64 {
		switch {
		case x == 0:
			return y
		case y == 0:
			return x
		}
		return min(x, y)
	}
	return TaskBudget{Tokens: least(b.Tokens, o.Tokens), USD: PicoUSD(least(uint64(b.USD), uint64(o.USD)))}
}

// String is b as TaskBudgetHeader carries it: "tokens=200000,usd=0.5",
// either part alone, "" for none.
func (b TaskBudget) String() string {
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, "tokens="+strconv.FormatUint(b.Tokens, 10))
	}
	if b.USD > 0 {
		parts = append(parts, "usd="+b.USD.Decimal())
	}
	return strings.Join(parts, ",")
}

// ParseTaskBudget reads what String writes.
func ParseTaskBudget(s string) (TaskBudget, error) {
	var b TaskBudget
	if s == "" {
		return b, nil
	}
	const fix = `write it as tokens=N, usd=D or both, e.g. "tokens=200000,usd=0.50"`
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || seen[k] {
			return b, fmt.Errorf("%s %q: %s", TaskBudgetHeader, s, fix)
		}
		seen[k] = true
		switch k {
		case "tokens":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return b, fmt.Errorf("%s %q: tokens=%q is not a whole number above 0; %s", TaskBudgetHeader, s, v, fix)
			}
			b.Tokens = n
		case "usd":
			d, err := ParseUSD(v)
			if err != nil || d == 0 {
				return b, fmt.Errorf("%s %q: usd=%q is not an amount of dollars above 0; %s", TaskBudgetHeader, s, v, fix)
			}
			b.USD = d
		default:
			return b, fmt.Errorf("%s %q: %q is neither tokens nor usd; %s", TaskBudgetHeader, s, k, fix)
		}
	}
	return b, nil
}

// TaskBudgetOf is the budget a task's headers carry (TaskBudgetHeader in
// any case, as a person typing it means it), nil if none.
func TaskBudgetOf(h map[string][]string) (*TaskBudget, error) {
	v := header(h, TaskBudgetHeader)
	if v == "" {
		return nil, nil
	}
	b, err := ParseTaskBudget(v)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// TaskSpendRequest asks what the task at Seq in TasksStream has spent.
// Final: its result is being stored; the proxy first lets the task's
// requests under way end (for a moment at most), so the spend stored is
// the task's whole.
type TaskSpendRequest struct {
	Seq   uint64 `json:"seq"`
	Final bool   `json:"final,omitempty"`
}

// TaskSpend is what a task's model requests spent, kept with its result:
// counted by the gateway on the host that ran it.
type TaskSpend struct {
	Requests uint64  `json:"requests"`
	Tokens   Tokens  `json:"tokens"`
	Cost     PicoUSD `json:"cost_usd"`
	// Budget is the budget its requests were held to, if any;
	// OutOfBudget, that one of them was refused because it would have
	// gone past it.
	Budget      *TaskBudget `json:"budget,omitempty"`
	OutOfBudget bool        `json:"out_of_budget,omitempty"`
}

// Line is s for a reader: "41200 tokens, $0.38 in 7 requests (out of its budget usd=0.30)".
func (s TaskSpend) Line() string {
	line := fmt.Sprintf("%d tokens, %s in %d requests", s.Tokens.Total(), s.Cost, s.Requests)
	if s.Requests == 1 {
		line = strings.TrimSuffix(line, "s")
	}
	switch {
	case s.OutOfBudget && s.Budget != nil:
		line += " (out of its budget " + s.Budget.String() + ")"
	case s.OutOfBudget:
		line += " (out of its budget)"
	}
	return line
}

// EncodeTaskSpend and ParseTaskSpend are the proxy's answer on the wire;
// EncodeTaskSpendRequest and ParseTaskSpendRequest, the question.
func EncodeTaskSpend(s TaskSpend) ([]byte, error) { return json.Marshal(s) }

func ParseTaskSpend(data []byte) (TaskSpend, error) {
	var s TaskSpend
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("a task's spend is JSON like {\"requests\":1,\"tokens\":{...},\"cost_usd\":0.01} (%v): %.200q", err, data)
	}
	return s, nil
}

func EncodeTaskSpendRequest(r TaskSpendRequest) []byte {
	b, _ := json.Marshal(r)
	return b
}

func ParseTaskSpendRequest(data []byte) (TaskSpendRequest, error) {
	var r TaskSpendRequest
	if err := json.Unmarshal(data, &r); err != nil || r.Seq == 0 {
		return r, fmt.Errorf("a task spend request is JSON like {\"seq\":12,\"final\":true}, with the task's place in %s: %.200q", TasksStream, data)
	}
	return r, nil
}
