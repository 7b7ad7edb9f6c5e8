package users

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/flockrun/flock/spec"
)

// CommentPrefix marks the accounts flock created: an account named like
// ours but without it belongs to someone else and is never touched.
const CommentPrefix = "flock agent "

// Shell of every agent account: agents run as units, nobody logs in.
const Shell = "/usr/sbin/nologin"

// Accounts is what f asks of /etc/passwd and /etc/group: the shared group
// (gid uid_base) and one account per agent (uid = gid = uid_base+id).
func Accounts(f *spec.Flock) (Group, []Account) {
	shared := Group{Name: spec.SharedGroup, GID: f.UIDBase}
	accts := make([]Account, 0, len(f.Agents))
	for _, a := range f.Agents {
		accts = append(accts, Account{
			Name:    spec.UserName(a.ID),
			UID:     f.UID(a.ID),
			Home:    f.AgentDir(a.ID),
			Comment: fmt.Sprintf("%s%d", CommentPrefix, a.ID),
			Groups:  []string{shared.Name},
		})
	}
	return shared, accts
}

// Paths is the directory tree of f, parents first:
//
//	root/            root 0755
//	root/agents/     root 0711  (traverse, not list)
//	root/agents/N/   flock-N 0700
//	root/common/     root:flock 2770, default ACL group flock rwX
//	root/logs/       root 0711
//	root/logs/N.log  flock-N 0600
//
// The units hide other agents' entries too; these modes are the second wall.
func Paths(f *spec.Flock) []Path {
	shared := f.UIDBase
	ps := []Path{
		{Path: f.Root, Dir: true, Mode: 0o755},
		{Path: f.AgentsDir(), Dir: true, Mode: 0o711},
		{Path: f.CommonDir(), Dir: true, GID: shared, Mode: 0o770 | fs.ModeSetgid, DefaultGroupRW: &shared},
		{Path: f.LogsDir(), Dir: true, Mode: 0o711},
	}
	for _, a := range f.Agents {
		uid := f.UID(a.ID)
		ps = append(ps,
			Path{Path: f.AgentDir(a.ID), Dir: true, UID: uid, GID: uid, Mode: 0o700},
			Path{Path: f.LogPath(a.ID), UID: uid, GID: uid, Mode: 0o600},
		)
	}
	return ps
}

// Seeds are the agents' bus seeds, which the bus makes: each its agent's
// own, read-only, in a directory only root lists (spec.CredDir); its
// unit binds it where the agent reads it.
func Seeds(f *spec.Flock) []Path {
	ps := make([]Path, 0, len(f.Agents))
	for _, a := range f.Agents {
		uid := f.UID(a.ID)
		ps = append(ps, Path{Path: spec.CredPath(spec.UserName(a.ID)), UID: uid, GID: uid, Mode: 0o400, Existing: true})
	}
	return ps
}

// SysusersPath is flock's drop-in; systemd-sysusers re-applies it at boot.
const SysusersPath = "/etc/sysusers.d/flock.conf"

// RenderSysusers writes the drop-in for shared and accts, sorted by uid so
// the same flock gives the same bytes on every host.
func RenderSysusers(shared Group, accts []Account) string {
	sorted := append([]Account(nil), accts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].UID < sorted[j].UID })
	var b strings.Builder
	b.WriteString("# Written by flockctl provision; do not edit (flockctl rewrites it).\n")
	fmt.Fprintf(&b, "g %s %d\n", shared.Name, shared.GID)
	for _, a := range sorted {
		fmt.Fprintf(&b, "u %s %d %q %s %s\n", a.Name, a.UID, a.Comment, a.Home, Shell)
		for _, g := range a.Groups {
			fmt.Fprintf(&b, "m %s %s\n", a.Name, g)
		}
	}
	return b.String()
}
