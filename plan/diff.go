package plan

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/wire"
)

// Current is what the host has of a flock, as far as a plan cares.
type Current struct {
	Accounts   map[string]users.Account // flock accounts by name
	Readers    *uint32                  // the readers' group's gid; nil: none
	Units      map[string]units.Status  // flock units by name
	BadPaths   map[string]string        // desired path -> what is wrong with it
	FirewallOK bool
	Keys       map[string]string // bus identity -> public key, as on disk
	BusConfig  *bus.Config       // as installed; nil if none
	Service    units.ServiceStatus
	// BusStatus is what the running bus said of itself: its Config is the
	// digest of the config it has in force (nil when it is not running or
	// does not answer: BusErr says why). Read-only verbs use it as it is.
	BusStatus *wire.BusStatus
	BusErr    error
	// ProxyConfig is the proxy's config file as installed (nil: none).
	ProxyConfig  []byte
	ProxyService units.ServiceStatus
	// CountersSocket and CountersService are the counters reader's
	// socket and template (of a template: its file alone).
	CountersSocket, CountersService units.ServiceStatus
	// SecretsMaterial is what is wrong with the secrets' material, path
	// -> why (nil: read on no host, as a reader's).
	SecretsMaterial map[string]string
}

// Observe reads the host's side of everything d describes: Read, then
// Current.
func Observe(ctx context.Context, h Host, d Desired) (Current, error) {
	// Refuse before anything changes if a name or id we need is someone
	// else's.
	if err := h.Users.Claim(ctx, d.Shared, d.Accounts); err != nil {
		return Current{}, err
	}
	paths := make([]string, len(d.Paths))
	for i, p := range d.Paths {
		paths[i] = p.Path
	}
	s, err := Read(ctx, h, paths)
	if err != nil {
		return Current{}, err
	}
	return s.Current(d)
}

func pathDrift(want, got users.Path, exists bool) string {
	switch {
	case !exists:
		return "missing"
	case got.Dir != want.Dir || got.Mode&fs.ModeSymlink != 0:
		return "wrong type"
	case got.UID != want.UID || got.GID != want.GID:
		return fmt.Sprintf("owner %d:%d, want %d:%d", got.UID, got.GID, want.UID, want.GID)
	case got.Mode != want.Mode:
		return fmt.Sprintf("mode %s, want %s", got.Mode, want.Mode)
	case want.DefaultGroupRW != nil && (got.DefaultGroupRW == nil || *got.DefaultGroupRW != *want.DefaultGroupRW):
		return "default ACL missing"
	}
	return ""
}

// Kind is what a change does.
type Kind string

const (
	StopUnit        Kind = "stop unit"
	RemoveUser      Kind = "remove user"
	RemoveIdentity  Kind = "remove identity"
	CreateUser      Kind = "create user"
	CreateGroup     Kind = "create group"
	EnsurePath      Kind = "ensure path"
	CreateIdentity  Kind = "create identity"
	WriteBusConfig  Kind = "write bus config"
	InstallBus      Kind = "install bus"
	StartBus        Kind = "(re)start bus"
	ReloadBus       Kind = "reload bus"
	EnsureSecrets   Kind = "ensure secrets"
	WriteProxyConf  Kind = "write proxy config"
	InstallProxy    Kind = "install proxy"
	HandOverProxy   Kind = "hand over"
	StartProxy      Kind = "(re)start proxy"
	ReloadProxy     Kind = "reload proxy"
	RemoveProxy     Kind = "remove proxy"
	InstallCounters Kind = "install counters"
	StartCounters   Kind = "(re)start counters"
	RemoveCounters  Kind = "remove counters"
	Firewall        Kind = "replace firewall"
	StartUnit       Kind = "start unit"
	RestartUnit     Kind = "restart unit"
)

// Change is one step of a plan; in JSON, as flockctl plan --output
// json prints it (a stable contract: fields may be added, none renamed).
type Change struct {
	Kind   Kind   `json:"kind"`
	Target string `json:"target"` // unit, user, path or table name
	Why    string `json:"why"`
}

// Plan is the ordered list of changes that makes the host match Desired.
type Plan struct{ Changes []Change }

// Without is p less the changes of the given kinds.
func (p Plan) Without(kinds ...Kind) Plan {
	var out Plan
	for _, c := range p.Changes {
		if !slices.Contains(kinds, c.Kind) {
			out.Changes = append(out.Changes, c)
		}
	}
	return out
}

// With is p and c, in the apply order (a change the caller knows of and
// the plan cannot see: the route password provision writes).
func (p Plan) With(c Change) Plan {
	out := Plan{Changes: append(slices.Clone(p.Changes), c)}
	sort.SliceStable(out.Changes, func(i, j int) bool { return rank(out.Changes[i].Kind) < rank(out.Changes[j].Kind) })
	return out
}

// Empty reports whether the host already matches.
func (p Plan) Empty() bool { return len(p.Changes) == 0 }

// Count returns how many changes are of kind k.
func (p Plan) Count(k Kind) int {
	n := 0
	for _, c := range p.Changes {
		if c.Kind == k {
			n++
		}
	}
	return n
}

func (p Plan) String() string {
	if p.Empty() {
		return "nothing to do: the host matches the spec\n"
	}
	var b strings.Builder
	for _, c := range p.Changes {
		fmt.Fprintf(&b, "%-16s %s (%s)\n", c.Kind, c.Target, c.Why)
	}
	return b.String()
}

// Summary is String for a plan of at most max changes; a larger one (a
// flock of a thousand) gets a line per kind: how many, the first and last
// targets, and the first reason.
func (p Plan) Summary(max int) string {
	if len(p.Changes) <= max {
		return p.String()
	}
	var b strings.Builder
	for start := 0; start < len(p.Changes); {
		end := start + 1
		for end < len(p.Changes) && p.Changes[end].Kind == p.Changes[start].Kind {
			end++
		}
		first, last := p.Changes[start], p.Changes[end-1]
		targets := first.Target
		if end-start > 1 {
			targets += " … " + last.Target
		}
		fmt.Fprintf(&b, "%-16s ×%d: %s (%s)\n", first.Kind, end-start, targets, first.Why)
		start = end
	}
	return b.String()
}

// Diff lists what must change on a host in state c to reach d.
func Diff(d Desired, c Current) Plan {
	var p Plan
	add := func(k Kind, target, why string) { p.Changes = append(p.Changes, Change{k, target, why}) }

	wantUnit := map[string]bool{}
	for _, u := range d.Units {
		wantUnit[u.Name] = true
	}
	elsewhere := map[string]string{} // unit and user names of other hosts' agents -> why
	for _, a := range d.Flock.Agents {
		if a.Host != d.Site.Host {
			why := "runs on host " + a.Host
			elsewhere[spec.UnitName(a.ID)], elsewhere[spec.UserName(a.ID)] = why, why
		}
	}
	notHere := func(name, why string) string {
		if w, ok := elsewhere[name]; ok {
			return w
		}
		return why
	}
	for _, name := range sortedKeys(c.Units) {
		if !wantUnit[name] {
			add(StopUnit, name, notHere(name, "agent not in spec"))
		}
	}

	wantAcct := map[string]users.Account{}
	for _, a := range d.Accounts {
		wantAcct[a.Name] = a
	}
	// sysusers never changes an account, so one that differs in uid or
	// home is removed and created again (its unit restarts).
	uidMoved := map[string]bool{}
	for _, name := range sortedKeys(c.Accounts) {
		got, want := c.Accounts[name], wantAcct[name]
		_, ok := wantAcct[name]
		switch {
		case !ok:
			add(RemoveUser, name, "agent not in spec")
		case got.UID != want.UID:
			add(RemoveUser, name, fmt.Sprintf("uid %d, want %d", got.UID, want.UID))
			uidMoved[name] = true
		case got.Home != want.Home:
			add(RemoveUser, name, fmt.Sprintf("home %s, want %s", got.Home, want.Home))
			uidMoved[name] = true
		}
	}
	for _, a := range d.Accounts {
		got, ok := c.Accounts[a.Name]
		switch {
		case !ok || uidMoved[a.Name]:
			add(CreateUser, a.Name, fmt.Sprintf("uid %d", a.UID))
		case !users.SameGroups(got.Groups, a.Groups):
			add(CreateUser, a.Name, fmt.Sprintf("in groups %v, want %v", got.Groups, a.Groups))
		}
	}

	if c.Readers == nil {
		add(CreateGroup, spec.ReadersGroup, "missing")
	}
	for _, pth := range d.Paths {
		if why, bad := c.BadPaths[pth.Path]; bad {
			add(EnsurePath, pth.Path, why)
		}
	}
	newID := diffBus(d, c, add, notHere)
	diffCounters(d, c, add)
	if d.SecretsMaterial && len(c.SecretsMaterial) > 0 {
		add(EnsureSecrets, spec.SecretsDir, materialWhy(c.SecretsMaterial))
	}
	diffProxy(d, c, newID[creds.ProxyName], add)
	if !c.FirewallOK {
		add(Firewall, "inet flock", "table missing or not as planned")
	}

	for i, u := range d.Units {
		st, ok := c.Units[u.Name]
		user := spec.UserName(d.Agents[i].ID)
		switch {
		case !ok:
			add(StartUnit, u.Name, "not running")
		case uidMoved[user]:
			add(RestartUnit, u.Name, "its user's uid changed")
		case newID[user]:
			add(RestartUnit, u.Name, "its bus credential is new")
		case st.Hash != u.Hash && st.Build != "" && u.Build != "" && st.Build != u.Build:
			add(RestartUnit, u.Name, fmt.Sprintf("it runs flock-agent build %s, the installed one is build %s", st.Build, u.Build))
		case st.Hash != u.Hash:
			add(RestartUnit, u.Name, "configuration changed")
		// deactivating: a stop in flight (an earlier run killed half-way,
		// or an operator) would leave it gone. activating is left to
		// systemd's start job.
		case st.ActiveState == "inactive" || st.ActiveState == "failed" || st.ActiveState == "deactivating":
			add(StartUnit, u.Name, st.ActiveState)
		}
	}
	sort.SliceStable(p.Changes, func(i, j int) bool { return rank(p.Changes[i].Kind) < rank(p.Changes[j].Kind) })
	return p
}

// diffBus lists the bus's changes: identities, its config, its unit and
// whether it must start, restart or reload. It returns the identities
// that will be created (their agents restart to load them).
func diffBus(d Desired, c Current, add func(Kind, string, string), notHere func(name, why string) string) map[string]bool {
	want := map[string]bool{}
	for _, name := range d.Identities {
		want[name] = true
	}
	for _, name := range sortedKeys(c.Keys) {
		if !want[name] {
			add(RemoveIdentity, name, notHere(name, "not in spec"))
		}
	}
	created := map[string]bool{}
	for _, name := range d.Identities {
		got, ok := c.Keys[name]
		derived, isDerived := d.Site.Keys[name]
		switch {
		case !ok:
			add(CreateIdentity, name, "missing")
			created[name] = true
		case isDerived && got != derived:
			// A random seed from before the flock spanned hosts, or one
			// of another secret: replaced, and handed to its agent again.
			add(CreateIdentity, name, "not the key derived from the cluster secret")
			if _, bad := c.BadPaths[spec.CredPath(name)]; !bad {
				add(EnsurePath, spec.CredPath(name), "its seed is replaced")
			}
			created[name] = true
		}
	}
	cfg := d.BusConfig(c.Keys)
	changed := ""
	// Most of the cluster is set up at start (listener, routes, replicas,
	// files: Config.NeedsRestart); which host each agent is on is a reload.
	clusterMoved := c.BusConfig != nil && !reflect.DeepEqual(cfg.Cluster, c.BusConfig.Cluster)
	switch {
	case c.BusConfig == nil:
		changed = "missing"
	case clusterMoved:
		changed = "its cluster (hosts, addresses, port, files or agents' hosts) changed"
	case len(created) > 0 || !cfg.Equal(*c.BusConfig):
		changed = "users, permissions or task settings changed"
	}
	if changed != "" {
		add(WriteBusConfig, bus.ConfigPath, changed)
	}
	fileChanged := !bytes.Equal(c.Service.File, d.Service)
	fileWhy := "unit file changed"
	if was, now := units.BusBuild(c.Service.File), units.BusBuild(d.Service); fileChanged && was != "" && now != "" && was != now {
		fileWhy = fmt.Sprintf("it runs flockctl build %s, the installed one is build %s", was, now)
	}
	switch {
	case fileChanged && c.Service.File != nil && c.Service.Enabled == "enabled":
		add(InstallBus, units.BusUnit, fileWhy)
	case fileChanged || c.Service.Enabled != "enabled":
		add(InstallBus, units.BusUnit, "unit file missing, changed or not enabled")
	case c.Service.NoAccount:
		add(InstallBus, units.BusUnit, "its user "+units.BusUser+" is missing")
	}
	listenMoved := c.BusConfig != nil && cfg.NeedsRestart(*c.BusConfig)
	switch {
	case c.Service.ActiveState != "active":
		add(StartBus, units.BusUnit, "not running")
	case fileChanged:
		add(StartBus, units.BusUnit, fileWhy)
	case c.Service.RestartOwed:
		add(StartBus, units.BusUnit, restartOwed)
	case c.Service.NoAccount:
		// Running as a uid no longer in passwd: dbus-daemon drops it.
		add(StartBus, units.BusUnit, "its user "+units.BusUser+" was made again")
	case listenMoved:
		add(StartBus, units.BusUnit, "listen, monitor or metrics address, store_max, sync or cluster changed")
	case c.BusStatus != nil && c.BusStatus.Sync != bus.SyncName(cfg.Tasks.Sync):
		// nats-server takes its sync policy at start only: a bus started
		// before the config changed (a provision killed in between), or
		// by a flockctl from before bus.sync, runs with another.
		add(StartBus, units.BusUnit, fmt.Sprintf("the running bus syncs %s, the spec says %s", runningSync(c.BusStatus.Sync), bus.SyncName(cfg.Tasks.Sync)))
	case changed != "":
		add(ReloadBus, units.BusUnit, changed)
	case c.BusErr != nil:
		add(ReloadBus, units.BusUnit, fmt.Sprintf("the running bus did not say which config it has: %v", c.BusErr))
	case c.BusStatus == nil || c.BusStatus.Config != c.BusConfig.Digest():
		// A reload refused, or a provision killed between writing the
		// config and reloading: the file is right, the bus is not.
		add(ReloadBus, units.BusUnit, "the running bus has not loaded its config")
	}
	return created
}

// runningSync is the sync policy a bus reports, "" from one older than
// the field (nats-server's default then).
func runningSync(s string) string {
	if s == "" {
		return "every 2m (a bus from before bus.sync)"
	}
	return s
}

// diffCounters lists the firewall counters reader's changes: its socket
// and template while bus.metrics is on, their removal once it is off. A
// new template needs no restart (each connection starts a new reader); a
// new socket file, or a bus account made again (the socket is that
// account's), does.
func diffCounters(d Desired, c Current, add func(Kind, string, string)) {
	if d.CountersSocket == nil {
		if c.CountersSocket.File != nil || c.CountersService.File != nil {
			add(RemoveCounters, units.CountersSocket, "bus.metrics is off")
		}
		return
	}
	templateChanged := !bytes.Equal(c.CountersService.File, d.CountersService)
	if !diffService(add, units.CountersSocket, c.CountersSocket, d.CountersSocket, InstallCounters, StartCounters, templateChanged, "") &&
		c.Service.NoAccount {
		add(StartCounters, units.CountersSocket, "its owner "+units.BusUser+" was made again")
	}
}

// restartOwed is why a static unit whose new file a killed run installed
// restarts (units.ServiceStatus.RestartOwed).
const restartOwed = "a provision was stopped before it restarted it: it runs its former unit file"

// diffService lists a static unit's install, when its file (or another
// of its files: alsoChanged) is missing or changed, or it is not
// enabled; and its (re)start, when it is not running, its file changed
// (why, "": "unit file changed"), or a killed run owes it a restart
// onto the file it installed. It says whether it planned a
// (re)start: the caller's other reasons come after those.
func diffService(add func(Kind, string, string), name string, st units.ServiceStatus, want []byte, install, start Kind, alsoChanged bool, why string) bool {
	fileChanged := !bytes.Equal(st.File, want)
	if fileChanged || alsoChanged || st.Enabled != "enabled" {
		add(install, name, "unit file missing, changed or not enabled")
	}
	switch {
	case st.ActiveState != "active":
		add(start, name, "not running")
	case fileChanged:
		add(start, name, cmp.Or(why, "unit file changed"))
	case st.RestartOwed:
		add(start, name, restartOwed)
	default:
		return false
	}
	return true
}

// diffProxy lists the egress proxy's changes: its config and unit while
// an agent has a name in its egress, their removal once none has. A new
// config reaches a running proxy by reload (open tunnels go on).
func diffProxy(d Desired, c Current, newIdentity bool, add func(Kind, string, string)) {
	if d.ProxyConfig == nil {
		if c.ProxyConfig != nil || c.ProxyService.File != nil {
			add(RemoveProxy, units.ProxyUnit, "no agent has a name in its egress")
		}
		return
	}
	cfgChanged := !bytes.Equal(c.ProxyConfig, d.ProxyConfig)
	if cfgChanged {
		why := "agents or names changed"
		if c.ProxyConfig == nil {
			why = "missing"
		}
		add(WriteProxyConf, proxy.ConfigPath, why)
	}
	_, newCA := c.SecretsMaterial[spec.SecretsCAPath]
	newCA = newCA && d.SecretsMaterial
	if why, ok := handOverWhy(c, d.ProxyService); ok && !newIdentity && !newCA && !c.ProxyService.RestartOwed {
		// The unit file differs in what is handed over alone:
		// installed, it changes nothing running; the secrets and keys
		// reach the proxy at a reload, which takes the config too.
		add(InstallProxy, units.ProxyUnit, why)
		add(HandOverProxy, units.ProxyUnit, why+": it takes them at a reload")
		return
	}
	var whys []string
	for _, dg := range []struct {
		digest func([]byte) string
		why    string
	}{{units.ProxySecretsDigest, "a secret's file changed"}, {units.ProxyModelsDigest, "a model API's key or CA changed"}} {
		if was, now := dg.digest(c.ProxyService.File), dg.digest(d.ProxyService); was != now && was != "" && now != "" {
			whys = append(whys, dg.why)
		}
	}
	why := ""
	if len(whys) > 0 {
		why = strings.Join(whys, "; ") + ": it reads them at start"
	}
	if diffService(add, units.ProxyUnit, c.ProxyService, d.ProxyService, InstallProxy, StartProxy, false, why) {
		return
	}
	switch {
	case newIdentity:
		add(StartProxy, units.ProxyUnit, "its bus identity is new")
	case newCA:
		add(StartProxy, units.ProxyUnit, "its CA is made anew: it reads it at start")
	case cfgChanged:
		add(ReloadProxy, units.ProxyUnit, "agents or names changed")
	}
}

// handOverWhy says why the running proxy is handed its secrets and
// model APIs' keys: its unit file as installed differs from want in
// their digests and credentials alone (units.ProxySecretsChange). A new
// provider is one of these: a reload reads its key and CA from what is
// handed over. Anything else changed, or a proxy not running, is a
// restart.
func handOverWhy(c Current, want []byte) (string, bool) {
	if c.ProxyService.ActiveState != "active" {
		return "", false
	}
	ch, ok := units.ProxySecretsChange(c.ProxyService.File, want)
	if !ok {
		return "", false
	}
	var whys []string
	switch {
	case ch.SecretCreds:
		whys = append(whys, "a secret is granted or taken away")
	case ch.Secrets:
		whys = append(whys, "a secret's file changed")
	}
	switch {
	case ch.ModelCreds:
		whys = append(whys, "a model API is added or removed")
	case ch.Models:
		whys = append(whys, "a model API's key or CA changed")
	}
	return cmp.Or(strings.Join(whys, "; "), "its credentials moved"), true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
