package users

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// passwdEntry and groupEntry are the lines of /etc/passwd and /etc/group
// that matter here. flock reads the files systemd-sysusers writes, not NSS:
// its accounts are always local.
type passwdEntry struct {
	Name    string
	UID     uint32
	GID     uint32
	Comment string
	Home    string
}

type groupEntry struct {
	Name    string
	GID     uint32
	Members []string
}

// etcDB is /etc/passwd and /etc/group as read at one moment.
type etcDB struct {
	users  []passwdEntry
	groups []groupEntry
}

func readEtc(dir string) (etcDB, error) {
	var db etcDB
	err := eachLine(dir+"/passwd", 7, func(f []string) error {
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad uid or gid in %q", strings.Join(f, ":"))
		}
		db.users = append(db.users, passwdEntry{Name: f[0], UID: uint32(uid), GID: uint32(gid), Comment: f[4], Home: f[5]})
		return nil
	})
	if err != nil {
		return db, err
	}
	err = eachLine(dir+"/group", 4, func(f []string) error {
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return fmt.Errorf("bad gid in %q", strings.Join(f, ":"))
		}
		g := groupEntry{Name: f[0], GID: uint32(gid)}
		if f[3] != "" {
			g.Members = strings.Split(f[3], ",")
		}
		db.groups = append(db.groups, g)
		return nil
	})
	return db, err
}

func eachLine(path string, fields int, fn func([]string) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue // NIS compat lines are not local accounts
		}
		f := strings.Split(line, ":")
		if len(f) != fields {
			return fmt.Errorf("%s:%d: %d fields, want %d", path, n, len(f), fields)
		}
		if err := fn(f); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

func (db etcDB) user(name string) (passwdEntry, bool) {
	return find(db.users, func(u passwdEntry) bool { return u.Name == name })
}

func (db etcDB) userByID(uid uint32) (passwdEntry, bool) {
	return find(db.users, func(u passwdEntry) bool { return u.UID == uid })
}

func (db etcDB) group(name string) (groupEntry, bool) {
	return find(db.groups, func(g groupEntry) bool { return g.Name == name })
}

func (db etcDB) groupByID(gid uint32) (groupEntry, bool) {
	return find(db.groups, func(g groupEntry) bool { return g.GID == gid })
}

func find[T any](xs []T, match func(T) bool) (T, bool) {
	if i := slices.IndexFunc(xs, match); i >= 0 {
		return xs[i], true
	}
	var zero T
	return zero, false
}

// ours reports whether u is an agent account flock created.
func ours(u passwdEntry) bool {
	if !strings.HasPrefix(u.Name, "flock-") || !strings.HasPrefix(u.Comment, CommentPrefix) {
		return false
	}
	_, err := strconv.Atoi(strings.TrimPrefix(u.Name, "flock-"))
	return err == nil
}

// accounts lists flock's agent accounts with the groups they are in.
func (db etcDB) accounts() []Account {
	var out []Account
	for _, u := range db.users {
		if !ours(u) {
			continue
		}
		a := Account{Name: u.Name, UID: u.UID, Home: u.Home, Comment: u.Comment}
		for _, g := range db.groups {
			for _, m := range g.Members {
				if m == u.Name {
					a.Groups = append(a.Groups, g.Name)
				}
			}
		}
		out = append(out, a)
	}
	return out
}
