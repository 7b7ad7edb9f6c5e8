package explain

import (
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
	"github.com/flockrun/flock/wire"
)

// unit records the unit's state and each property flock sets as systemd
// has it, and drift where a comparable one differs.
func (r *Report) unit(u units.Unit, live map[string]any) {
	r.Unit.Loaded = true
	r.Unit.ActiveState, _ = live["ActiveState"].(string)
	r.Unit.SubState, _ = live["SubState"].(string)
	if r.Unit.ActiveState != "active" {
		r.drift("unit", u.Name, "active", r.Unit.ActiveState+"/"+r.Unit.SubState)
	}
	desc, _ := live["Description"].(string)
	r.Unit.Properties = append(r.Unit.Properties, Property{Name: "Description", Live: desc, Planned: u.Description})
	if desc != u.Description {
		r.drift("property", "Description", u.Description, desc)
	}
	seen := map[string]bool{}
	for _, p := range u.Properties {
		if seen[p.Name] { // SystemCallFilter comes twice; systemd merges them
			continue
		}
		seen[p.Name] = true
		v, ok := live[p.Name]
		if !ok {
			// flock set it at start; systemd not reporting it means this
			// unit was not started with it.
			r.Unit.Properties = append(r.Unit.Properties, Property{Name: p.Name, Live: "(not reported)"})
			want, _ := text(p.Value, p.Value)
			r.drift("property", p.Name, want, "(not reported)")
			continue
		}
		want, comparable := text(p.Value, p.Value)
		have, _ := text(v, p.Value)
		prop := Property{Name: p.Name, Live: have}
		if comparable {
			prop.Planned = want
			if have != want {
				r.drift("property", p.Name, want, have)
			}
		}
		r.Unit.Properties = append(r.Unit.Properties, prop)
	}
}

// text prints v (a planned Go value or one D-Bus decoded) as systemctl
// show would, in the form of like (the planned value, which says the
// property's kind). comparable is false for structured values, which
// systemd reports in another shape than it was given (its own field order,
// defaults filled in): those are shown, not compared.
func text(v, like any) (s string, comparable bool) {
	switch w := v.(type) {
	case string:
		return w, true
	case bool:
		if w {
			return "yes", true
		}
		return "no", true
	case []string:
		return strings.Join(w, " "), true
	case uint64:
		if w == math.MaxUint64 {
			return "infinity", true
		}
		return strconv.FormatUint(w, 10), true
	case int32:
		return strconv.Itoa(int(w)), true
	case uint32:
		if _, mode := like.(units.FileMode); mode {
			return fmt.Sprintf("%04o", w), true
		}
		return strconv.FormatUint(uint64(w), 10), true
	case units.FileMode:
		return fmt.Sprintf("%04o", uint32(w)), true
	}
	return fmt.Sprint(v), false
}

// rules records drift between the rules planned for the uid and those in
// force: a rule missing, or one there that flock did not plan.
func (r *Report) rules(planned, live []string) {
	for _, p := range planned {
		if !slices.Contains(live, p) {
			r.drift("firewall", p, p, "")
		}
	}
	for _, l := range live {
		if !slices.Contains(planned, l) {
			r.drift("firewall", l, "", l)
		}
	}
}

// path records a path as the host has it, and drift from what flock sets.
func (r *Report) path(want, have users.Path, present bool) {
	p := Path{Path: want.Path, Present: present}
	if !present {
		r.Paths = append(r.Paths, p)
		r.drift("path", want.Path, "present", "missing")
		return
	}
	p.Type = typeName(have)
	p.Mode = fmt.Sprintf("%04o", unixMode(have.Mode))
	p.UID, p.GID, p.Owner = have.UID, have.GID, ownerName(have.UID, have.GID)
	if have.DefaultGroupRW != nil {
		p.ACL = fmt.Sprintf("default:group:%d:rwx", *have.DefaultGroupRW)
	}
	r.Paths = append(r.Paths, p)

	if wantType := typeName(want); p.Type != wantType {
		r.drift("path", want.Path, "a "+wantType, "a "+p.Type)
		return
	}
	if w := fmt.Sprintf("%04o", unixMode(want.Mode)); w != p.Mode {
		r.drift("path", want.Path+" mode", w, p.Mode)
	}
	if want.UID != have.UID || want.GID != have.GID {
		r.drift("path", want.Path+" owner", ownerName(want.UID, want.GID), p.Owner)
	}
	var wantACL string
	if want.DefaultGroupRW != nil {
		wantACL = fmt.Sprintf("default:group:%d:rwx", *want.DefaultGroupRW)
	}
	if want.Dir && wantACL != p.ACL {
		r.drift("path", want.Path+" acl", orNone(wantACL), orNone(p.ACL))
	}
}

func typeName(p users.Path) string {
	switch {
	case p.Mode&fs.ModeSymlink != 0:
		return "symlink"
	case p.Dir:
		return "directory"
	}
	return "file"
}

// unixMode is the permission bits with setuid, setgid and sticky as chmod
// writes them.
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// bus records drift between the permissions planned for the agent and
// those the running bus has in force.
func (r *Report) bus(want bus.User, have wire.Permissions) {
	list := func(l []string) string {
		if len(l) == 0 {
			return "(nothing)"
		}
		return strings.Join(l, " ")
	}
	// An empty list is "deny >" to nats-server (bus.permissions).
	eff := func(sr wire.SubjectRules) []string {
		if len(sr.Allow) == 0 && slices.Equal(sr.Deny, []string{">"}) {
			return nil
		}
		if len(sr.Deny) > 0 {
			return append(slices.Clone(sr.Allow), "deny:"+strings.Join(sr.Deny, ","))
		}
		return sr.Allow
	}
	if w, h := list(want.Publish), list(eff(have.Publish)); w != h {
		r.drift("bus", "publish", w, h)
	}
	if w, h := list(want.Subscribe), list(eff(have.Subscribe)); w != h {
		r.drift("bus", "subscribe", w, h)
	}
	var w, h string
	if want.ResponseTTL > 0 {
		w = fmt.Sprintf("1 answer within %s", want.ResponseTTL)
	}
	if have.Responses != nil {
		h = fmt.Sprintf("%d answer within %s", have.Responses.MaxMsgs, have.Responses.Expires)
	}
	if w != h {
		r.drift("bus", "responses", orNone(w), orNone(h))
	}
}
