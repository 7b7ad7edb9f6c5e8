package users

import (
	"errors"
	"fmt"
)

// claim checks that every name and id flock wants is free or already
// flock's, so nothing of someone else's is changed and systemd-sysusers
// never silently picks another uid. It reads only.
func claim(db etcDB, shared Group, accts []Account) error {
	var errs []error
	notOurs := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrNotOurs}, args...)...))
	}
	if g, ok := db.group(shared.Name); ok && g.GID != shared.GID && !db.sharedGroupOurs(g) {
		notOurs("group %q exists with gid %d and has members flock did not create; flock needs that name for its shared group: rename that group", g.Name, g.GID)
	}
	if g, ok := db.groupByID(shared.GID); ok && g.Name != shared.Name && !db.agentGroup(g) {
		notOurs("gid %d (uid_base) is group %q; choose another uid_base", shared.GID, g.Name)
	}
	for _, a := range accts {
		if u, ok := db.user(a.Name); ok && !ours(u) {
			notOurs("user %q exists (uid %d, comment %q) and was not created by flock; remove or rename it, or drop agent %s from the spec", u.Name, u.UID, u.Comment, a.Name)
		}
		if u, ok := db.userByID(a.UID); ok && u.Name != a.Name && !ours(u) {
			notOurs("uid %d (for %s) is user %q; choose another uid_base", a.UID, a.Name, u.Name)
		}
		if g, ok := db.groupByID(a.UID); ok && g.Name != a.Name && !db.agentGroup(g) && g.Name != shared.Name {
			notOurs("gid %d (for %s) is group %q; choose another uid_base", a.UID, a.Name, g.Name)
		}
		if g, ok := db.group(a.Name); ok && g.GID != a.UID && !db.agentGroup(g) {
			notOurs("group %q exists with gid %d, not %d; remove it or drop agent %s from the spec", g.Name, g.GID, a.UID, a.Name)
		}
	}
	return errors.Join(errs...)
}

// agentGroup reports whether g is the own group of one of flock's accounts.
func (db etcDB) agentGroup(g groupEntry) bool {
	u, ok := db.user(g.Name)
	return ok && ours(u) && u.GID == g.GID
}

// sharedGroupOurs reports whether the group named like flock's shared group
// holds flock's agents and nobody else.
func (db etcDB) sharedGroupOurs(g groupEntry) bool {
	if len(g.Members) == 0 {
		return false
	}
	for _, m := range g.Members {
		if u, ok := db.user(m); !ok || !ours(u) {
			return false
		}
	}
	return true
}
