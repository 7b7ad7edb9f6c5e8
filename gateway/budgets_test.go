package gateway

// Tier: unit. Money, and budgets shared by several agents: what a
// request costs is its reported usage at its model's price, exactly; a
// budget holds its agents together to its limits by the same
// reservation before sending as a grant's, so that a hundred agents at
// once never spend past it; a model without a price is refused where a
// limit in dollars applies.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/flockrun/flock/modelapi"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// sonnet is a model the shipped table prices.
const sonnet = "claude-sonnet-4-5"

func sonnetPrice(t *testing.T) modelapi.Price {
	t.Helper()
	p, ok := modelapi.Shipped().Lookup("anth", "anthropic", sonnet+"-20250929")
	if !ok || p.Output == 0 {
		t.Fatalf("the shipped table has no price of %s", sonnet)
	}
	return p
}

// withBudgets sets the rig's policy again, with budgets.
func (r *rig) withBudgets(grants map[uint32]Agent, bs ...spec.Budget) {
	r.t.Helper()
	p := r.policy(grants)
	p.Budgets = bs
	if err := r.g.SetPolicy(p, r.secrets); err != nil {
		r.t.Fatal(err)
	}
}

// The cost counted is the usage the stand-in reported, cache reads and
// writes included, at the table's price: exact to the picodollar over
// ten thousand requests.
func TestGatewayCostIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("ten thousand requests: not in -short")
	}
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth"}}, nil))
	c := r.client(uidA)
	body := `{"model":"` + sonnet + `-20250929","max_tokens":50,"messages":[{"role":"user","content":"write a few words for the cache, on a prompt long enough that a part of it is read from the cache and a part is written to it"}]}`
	const n = 10000
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/anth/v1/messages", strings.NewReader(body))
				req.Header.Set("X-Standin-Tag", "cost")
				req.Header.Set("X-Standin-Words", fmt.Sprint(1+i%40))
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	rep := r.up.Reported("cost")
	want := sonnetPrice(t).Cost(reported(rep))
	eventually(t, func() error {
		u := r.g.Store.Usage(idA)["anth"]
		if u.Requests != n || u.Cost != want || u.DayCost != want {
			return errorf("%d requests cost %d (%s), today %d; the stand-in's usage %+v at the table's price is %d (%s)", u.Requests, u.Cost, u.Cost, u.DayCost, rep, want, want)
		}
		return nil
	})
	if rep.CacheRead == 0 || rep.CacheWrite == 0 {
		t.Errorf("the stand-in reported no cache tokens: %+v", rep)
	}
	t.Logf("%d requests: %s, as the stand-in's usage at the table's price", n, want)
}

// A hundred agents in one budget, four requests each at once, half of
// them streams cut early: together they never spend past the budget's
// dollars, the refusal names the budget, and its crossing is one event.
func TestGatewayBudgetIsACeiling(t *testing.T) {
	const agents = 100
	budget := spec.Budget{Name: "team", Limits: spec.MoneyLimits{USDPerDay: wire.USD / 10}}
	grantsOf := map[uint32]Agent{}
	for i := range agents {
		grantsOf[uint32(3000000000+i)] = Agent{ID: 100 + i, Grants: map[string]spec.Grant{"anth": {Provider: "anth"}}}
		budget.Agents = append(budget.Agents, 100+i)
	}
	r := newRig(t, grantsOf)
	r.withBudgets(grantsOf, budget)
	req := func(stream bool) string {
		return fmt.Sprintf(`{"model":"%s","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"write"}]}`, sonnet, stream)
	}
	var mu sync.Mutex
	statuses, lines := map[int]int{}, map[string]bool{}
	r.burst(grantsOf, req, func(uid uint32, status int, read string) {
		mu.Lock()
		defer mu.Unlock()
		statuses[status]++
		if status == 429 {
			msg := errorMessage(t, read)
			lines[msg[:strings.Index(msg, ":")+1]+msg[strings.Index(msg, " over"):strings.Index(msg, " by its agents")]] = true
		}
	})
	var spent wire.PicoUSD
	for _, a := range grantsOf {
		spent += r.g.Store.Usage(a.ID)["anth"].DayCost
	}
	day, _ := r.g.Store.Group("team", r.g.now())
	t.Logf("%d agents, 4 requests each at once: statuses %v; spent %s of the budget's %s", agents, statuses, spent, budget.Limits.USDPerDay)
	if spent > budget.Limits.USDPerDay || day.Cost != spent {
		t.Errorf("the agents spent %s together (the budget's window says %s), past the budget's %s", spent, day.Cost, budget.Limits.USDPerDay)
	}
	if statuses[429] == 0 || statuses[200] == 0 {
		t.Errorf("statuses %v: want some let through and some refused", statuses)
	}
	for line := range lines {
		if !strings.Contains(line, "over the limit usd_per_day=$0.10 of budget team") {
			t.Errorf("a refusal: %q", line)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.crossed) != 1 || r.crossed[0].Budget != "team" || r.crossed[0].Limit != LimitUSDDay {
		t.Errorf("crossings told: %+v; want one, of the budget", r.crossed)
	}
}

// Where a limit in dollars applies, a model without a price is refused,
// naming the model and the fix; where none does, it goes (its cost is
// not counted).
func TestGatewayRefusesAModelWithoutAPriceUnderAMoneyLimit(t *testing.T) {
	r := newRig(t, grants(map[string]spec.Grant{"anth": {Provider: "anth", USDPerDay: wire.USD}}, map[string]spec.Grant{"anth": {Provider: "anth"}}))
	unpriced := `{"model":"claude-from-the-future","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	status, h, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", unpriced)
	if status != 403 || h.Get("X-Flock-Proxy") != "refused" || !strings.Contains(body, `the model \"claude-from-the-future\" of provider anth has no price, and a limit in dollars applies to this agent (its grant of anth); add it to providers[name=anth].prices`) {
		t.Errorf("an unpriced model under usd_per_day: %d %s", status, body)
	}
	if status, _, body := r.call(uidB, http.MethodPost, "/anth/v1/messages", unpriced); status != 200 {
		t.Errorf("an unpriced model with no money limit: %d %s", status, body)
	}
	priced := `{"model":"` + sonnet + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	if status, _, body := r.call(uidA, http.MethodPost, "/anth/v1/messages", priced); status != 200 {
		t.Errorf("a priced model under usd_per_day: %d %s", status, body)
	}
	eventually(t, func() error {
		if u := r.g.Store.Usage(idA)["anth"]; u.Cost == 0 || u.Requests != 1 {
			return errorf("agent A: %d requests, cost %s", u.Requests, u.Cost)
		}
		if u := r.g.Store.Usage(idB)["anth"]; u.Cost != 0 || u.Requests != 1 {
			return errorf("agent B: %d requests, cost %s (an unpriced model costs nothing here)", u.Requests, u.Cost)
		}
		return nil
	})
}
