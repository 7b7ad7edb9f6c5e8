package users

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// removeFromEtc deletes the users named in gone, and their own groups,
// from passwd, shadow, group and gshadow in one rewrite of each file, and
// takes them out of every group's member list. userdel does the same for
// one user and rewrites every file each time, so a thousand agents cost a
// thousand rewrites of thousand-line files (minutes); this is one. It
// holds the shadow suite's lock (/etc/.pwd.lock, as lckpwdf and userdel
// take it), so no useradd or userdel runs in between. Callers pass only
// flock's own accounts; a line this code does not understand is kept.
func removeFromEtc(dir string, gone map[string]bool) error {
	if len(gone) == 0 {
		return nil
	}
	unlock, err := lockEtc(dir)
	if err != nil {
		return err
	}
	defer unlock()
	for _, f := range []struct {
		name string
		edit func(fields []string) (keep bool)
	}{
		// name:x:uid:gid:gecos:home:shell and name:hash:...: the user.
		{"passwd", func(f []string) bool { return !gone[f[0]] }},
		{"shadow", func(f []string) bool { return !gone[f[0]] }},
		// name:x:gid:members: the user's own group goes, and the user
		// leaves every other.
		{"group", func(f []string) bool { return dropMembers(f, 3, gone) }},
		// name:password:admins:members.
		{"gshadow", func(f []string) bool { return dropMembers(f, 2, gone) && dropMembers(f, 3, gone) }},
	} {
		if err := rewriteEtc(filepath.Join(dir, f.name), f.edit); err != nil {
			return err
		}
	}
	return nil
}

// dropMembers takes gone out of the comma-separated list in field i of a
// group line, and says whether the line stays: not when it is the group
// of a gone user (same name) and no one else is in it.
func dropMembers(f []string, i int, gone map[string]bool) bool {
	if i >= len(f) {
		return true
	}
	if f[i] != "" {
		f[i] = strings.Join(slices.DeleteFunc(strings.Split(f[i], ","), func(m string) bool { return gone[m] }), ",")
	}
	return !gone[f[0]] || f[len(f)-1] != ""
}

// rewriteEtc rewrites path with the lines edit keeps (edit may change the
// fields of a line it keeps), atomically and with the file's own mode and
// owner. An absent file (no gshadow) is nothing to do.
func rewriteEtc(path string, edit func([]string) bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	changed := false
	for sc.Scan() {
		line := sc.Text()
		f := strings.Split(line, ":")
		if len(f) < 2 || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-") {
			out.WriteString(line + "\n") // not an entry of ours to judge
			continue
		}
		if !edit(f) {
			changed = true
			continue
		}
		if kept := strings.Join(f, ":"); kept != line {
			changed = true
			line = kept
		}
		out.WriteString(line + "\n")
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if !changed {
		return nil
	}
	return replaceKeepingOwner(path, out.Bytes())
}

// replaceKeepingOwner writes data to path through a temporary file in the
// same directory with path's mode and owner, then renames it over path.
func replaceKeepingOwner(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	tmp := path + ".flock-tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chown(int(st.Uid), int(st.Gid))
	}
	if err == nil {
		err = f.Chmod(fi.Mode().Perm())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rewriting %s: %w", path, err)
	}
	return nil
}

// lockEtc takes the lock the shadow suite takes before it changes the
// account files (lckpwdf: a write lock on /etc/.pwd.lock), waiting for it.
func lockEtc(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".pwd.lock"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the account files' lock: %w", err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLKW, &lk); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}
