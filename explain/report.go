// Package explain reads one agent's walls from the live host (its unit as
// systemd has it, the firewall rules of its uid, its paths, its bus
// permissions, the kernel's features, systemd's exposure score) and says
// where they differ from the plan. It changes nothing. Every source is an
// OS boundary behind its own package's interface, so the assembly and the
// drift are tested on fakes.
package explain

import (
	"time"

	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/wire"
)

// Report is `flockctl explain ID --output json`. Its fields are a stable
// contract (docs/security.md, "explain ID"): new fields may be added, none renamed.
type Report struct {
	Agent int `json:"agent"`
	// Host is where it runs in a flock on several hosts; nil on one host.
	Host   *Host    `json:"host,omitempty"`
	User   string   `json:"user"`
	UID    uint32   `json:"uid"`
	Role   string   `json:"role"`
	Level  string   `json:"level"`
	Label  string   `json:"label"`
	Egress []string `json:"egress"` // address allowances besides the bus, as the spec writes them
	// Names are its egress host names (NAME:PORT/tcp), reached only
	// through flock-proxy at Proxy, never directly.
	Names []string `json:"names"`
	Proxy string   `json:"proxy,omitempty"` // the proxy's address; "" when it has no names and no model APIs
	// Models are the model APIs it is granted (models.go): reached
	// through the gateway in flock-proxy, which holds their keys.
	Models []Model `json:"models"`
	// Secrets are the secrets it is granted (secrets.go): held by
	// flock-proxy, the agent holding placeholders.
	Secrets []Secret `json:"secrets"`
	// Budgets are the budgets its model requests must also fit.
	Budgets []Budget `json:"budgets,omitempty"`
	// TaskBudget is what each task it takes may spend (a worker's
	// task_budget).
	TaskBudget *wire.TaskBudget `json:"task_budget,omitempty"`
	Limits     Limits           `json:"limits"`
	Unit       Unit             `json:"unit"`
	Firewall   []string         `json:"firewall"` // rules of table inet flock that apply to its uid, as `nft list` prints them
	Paths      []Path           `json:"paths"`
	// Bus is its permissions as the running bus has them; nil when the
	// bus could not be asked (Unread says why).
	Bus      *wire.Permissions `json:"bus"`
	Kernel   Kernel            `json:"kernel"`
	Exposure Exposure          `json:"exposure"`
	Drift    []Drift           `json:"drift"`  // where the host differs from the plan; empty: none
	Unread   []string          `json:"unread"` // sources that could not be read, with the error
}

// Host is one machine of a flock on several hosts.
type Host struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// Limits are what its cgroup enforces, as the spec asks.
type Limits struct {
	MemoryBytes uint64 `json:"memory_bytes"`
	CPUPercent  int    `json:"cpu_percent"`
	Tasks       int    `json:"tasks"`
}

// Unit is the agent's unit as systemd has it.
type Unit struct {
	Name        string `json:"name"`
	Loaded      bool   `json:"loaded"`
	ActiveState string `json:"active_state"`
	SubState    string `json:"sub_state"`
	// Properties are the properties flock sets, each as systemd reports
	// it now (`systemctl show` style text).
	Properties []Property `json:"properties"`
}

// Property is one unit property: systemd's value, and flock's where the
// two can be compared ("" when the value is structured and only shown).
type Property struct {
	Name    string `json:"name"`
	Live    string `json:"live"`
	Planned string `json:"planned,omitempty"`
}

// Path is one of its paths as the host has it.
type Path struct {
	Path    string `json:"path"`
	Present bool   `json:"present"`
	Type    string `json:"type"` // "directory", "file", "symlink"
	Mode    string `json:"mode"` // octal, with setgid etc.: "2770"
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	Owner   string `json:"owner"` // user:group names where the host knows them
	// ACL is flock's default ACL where one is set ("default:group:2000000000:rwx").
	ACL string `json:"acl,omitempty"`
}

// Kernel is what the kernel offers the walls that depend on it.
type Kernel struct {
	Release     string `json:"release"`
	LandlockABI int    `json:"landlock_abi"` // 0: no Landlock
	// IPCScopes: Landlock scopes abstract UNIX sockets and signals (ABI 6,
	// Linux 6.12); without them an agent at level process can reach
	// another's abstract sockets.
	IPCScopes bool   `json:"ipc_scopes"`
	Note      string `json:"note"`
	// Open are the walls the agent's level cannot close on this kernel,
	// with the reason (sandbox.Driver.Gaps).
	Open []sandbox.Gap `json:"open"`
}

// Exposure is `systemd-analyze security`'s overall exposure of the unit
// (0 best, 10 worst); Unavailable says why there is none.
type Exposure struct {
	Score       *float64 `json:"score"`
	Rating      string   `json:"rating,omitempty"` // "OK", "MEDIUM", ...
	Unavailable string   `json:"unavailable,omitempty"`
}

// Drift is one place where the host differs from the plan.
type Drift struct {
	Kind string `json:"kind"` // "unit", "property", "firewall", "path", "bus", "proxy"
	What string `json:"what"` // the property, rule, path or list
	Want string `json:"want"` // "" for a rule that should not be there
	Have string `json:"have"` // "" for a rule that is missing
}

// timeout bounds one source's answer.
const timeout = 10 * time.Second
