package explain

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints r for an operator: one section per wall, drift last.
func (r Report) WriteText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("# agent %d: user %s (uid %d), role %s, level %s: %s", r.Agent, r.User, r.UID, r.Role, r.Level, r.Label)
	if r.Host != nil {
		p("host: %s (%s)", r.Host.Name, r.Host.Address)
	}
	p("egress: %s", orNone(strings.Join(r.Egress, " ")))
	if len(r.Names) > 0 {
		p("%s", NamesLine(r.Names, r.Proxy))
	}
	for _, l := range append(ModelLines(r.Models), SecretLines(r.Secrets)...) {
		p("%s", l)
	}
	if l := BudgetLine(r.Budgets); l != "" {
		p("%s", l)
	}
	if l := TaskBudgetLine(r.TaskBudget); l != "" {
		p("%s", l)
	}
	p("limits: memory %d bytes, cpu %d%%, tasks %d", r.Limits.MemoryBytes, r.Limits.CPUPercent, r.Limits.Tasks)

	p("\n## unit %s (as systemd has it)", r.Unit.Name)
	if !r.Unit.Loaded {
		p("not loaded")
	} else {
		p("state: %s/%s", r.Unit.ActiveState, r.Unit.SubState)
		for _, x := range r.Unit.Properties {
			v := x.Live
			if len(v) > maxShown { // a syscall list: the whole of it is in --output json
				v = v[:maxShown] + " ... (--output json has all)"
			}
			p("%s=%s", x.Name, v)
		}
	}

	p("\n## firewall: rules of table inet flock for uid %d (nft list)", r.UID)
	for _, x := range r.Firewall {
		p("%s", x)
	}

	p("\n## paths")
	for _, x := range r.Paths {
		if !x.Present {
			p("%-40s missing", x.Path)
			continue
		}
		acl := ""
		if x.ACL != "" {
			acl = " acl " + x.ACL
		}
		p("%-40s %-9s %s %s%s", x.Path, x.Type, x.Mode, x.Owner, acl)
	}

	p("\n## bus (as the running bus has it)")
	if b := r.Bus; b != nil {
		p("user %s, nkey %s", b.User, b.Nkey)
		p("publish:   allow %s%s", orNone(strings.Join(b.Publish.Allow, " ")), deny(b.Publish.Deny))
		p("subscribe: allow %s%s", orNone(strings.Join(b.Subscribe.Allow, " ")), deny(b.Subscribe.Deny))
		if b.Responses != nil {
			p("answers:   %d per request, within %s", b.Responses.MaxMsgs, b.Responses.Expires)
		}
	}

	p("\n## kernel %s", r.Kernel.Release)
	p("%s", r.Kernel.Note)
	for _, g := range r.Kernel.Open {
		p("OPEN at level %s on this host: %s: %s", r.Level, g.Wall, g.Why)
	}

	p("\n## exposure (systemd-analyze security)")
	if r.Exposure.Score != nil {
		p("%.1f %s", *r.Exposure.Score, r.Exposure.Rating)
	} else {
		p("unavailable: %s", r.Exposure.Unavailable)
	}

	p("\n## drift")
	if len(r.Drift) == 0 {
		p("none: the host is as planned")
	}
	for _, d := range r.Drift {
		switch {
		case d.Want == "":
			p("%s: not planned: %s", d.Kind, d.Have)
		case d.Have == "":
			p("%s: missing: %s", d.Kind, d.Want)
		default:
			p("%s: %s: want %s, have %s", d.Kind, d.What, d.Want, d.Have)
		}
	}
	for _, u := range r.Unread {
		p("unread: %s", u)
	}
}

// NamesLine says which names an agent reaches and through what.
func NamesLine(names []string, proxyAddr string) string {
	return fmt.Sprintf("# names (through flock-proxy on %s): %s", proxyAddr, strings.Join(names, " "))
}

// maxShown bounds one property's value in the text form.
const maxShown = 300

func deny(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return ", deny " + strings.Join(l, " ")
}
