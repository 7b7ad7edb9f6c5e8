package spec

import "github.com/flockrun/flock/modelapi"

// The fields the parser accepts, by the mapping they sit in: the one list
// each mapping is read against (walker.fields refuses any other key and
// names these in its fix). docs/spec.md documents exactly these, and its
// test (reference_test.go) fails when the two differ.
var (
	topKeys  = []string{"root", "uid_base", "bus", "hosts", "providers", "secrets", "defaults", "agents", "budgets"}
	busKeys  = []string{"listen", "monitor", "metrics", "store_max", "max_deliveries", "cluster_port", "sync", "max_subscriptions", "max_pending", "send_rate", "connect_rate"}
	hostKeys = []string{"name", "address"}
	// providerKeys are one entry of providers:.
	providerKeys = []string{"name", "kind", "url", "key_file", "ca_file", "prices"}
	// agentKeys are the fields of one agent; defaults takes them all but
	// id, and the count form (agents: {count: N}) count instead of id.
	agentKeys    = []string{"id", "host", "role", "level", "command", "exec", "rootfs", "image", "task_timeout", "max_output", "heartbeat", "limits", "common", "jit", "egress", "subjects", "env", "models", "secrets", "task_budget", "shares"}
	defaultKeys  = agentKeys[1:]
	countKeys    = append([]string{"count"}, agentKeys[1:]...)
	limitKeys    = []string{"memory", "cpu", "tasks"}
	shareKeys    = []string{"connections", "tasks", "task_bytes", "tunnels", "handshakes"}
	subjectsKeys = []string{"publish", "subscribe"}
	// grantKeys are the limits of one provider in an agent's models:, and
	// what its requests may ask of the provider beyond the model.
	grantKeys = []string{"requests_per_minute", "tokens_per_day", "tokens_per_month", "usd_per_day", "usd_per_month", "concurrent", "server_tools", "betas"}
	// secretKeys are one entry of secrets:, injectKeys where it goes,
	// rulesKeys and ruleKeys the requests it may carry.
	secretKeys = []string{"name", "file", "hosts", "inject", "env", "rules"}
	injectKeys = []string{"header", "prefix", "basic", "query"}
	rulesKeys  = []string{"allow", "deny"}
	ruleKeys   = []string{"methods", "path"}
	// budgetKeys are one entry of budgets:.
	budgetKeys = []string{"name", "agents", "roles", "tokens_per_day", "tokens_per_month", "usd_per_day", "usd_per_month"}
)

// acceptedFields lists every field the parser accepts, from the lists it
// reads mappings against, as the spec reference names them: the path from
// the top, "[]" for an item of a list, <provider> for a key the operator
// chooses, <model> for a model's id (env takes any name and holds strings: it has no fields of its
// own). defaults and the count form take the agent's fields (agents[].*),
// which the reference documents once.
func acceptedFields() []string {
	var out []string
	add := func(prefix string, keys []string) {
		for _, k := range keys {
			out = append(out, prefix+k)
		}
	}
	add("", topKeys)
	add("bus.", busKeys)
	add("hosts[].", hostKeys)
	add("providers[].", providerKeys)
	add("providers[].prices.<model>.", modelapi.PriceKeys)
	add("agents[].", agentKeys)
	add("agents[].limits.", limitKeys)
	add("agents[].shares.", shareKeys)
	add("agents[].subjects.", subjectsKeys)
	add("agents[].models.<provider>.", grantKeys)
	add("secrets[].", secretKeys)
	add("secrets[].inject.", injectKeys)
	add("secrets[].inject.basic.", []string{"user"})
	add("secrets[].rules.", rulesKeys)
	add("secrets[].rules.allow[].", ruleKeys)
	add("secrets[].rules.deny[].", ruleKeys)
	add("budgets[].", budgetKeys)
	return append(out, "agents.count")
}
