package users

// Tier: unit (no root), except TestEnsurePathsOnDisk (root). The Host
// contract itself is userstest's, in conformance_test.go.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/internal/tier"
	"github.com/flockrun/flock/spec"
)

func mustParse(t *testing.T, yaml string) *spec.Flock {
	t.Helper()
	f, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSysusersGolden(t *testing.T) {
	f := mustParse(t, "agents: [{id: 3}, {id: 1}, {id: 2}]\n")
	golden.Check(t, filepath.Join("testdata", "flock.conf.golden"), RenderSysusers(Accounts(f)))
	golden.Check(t, filepath.Join("testdata", "flock-readers.conf.golden"), RenderReadersSysusers())
}

func TestSameSpecSameIDsEverywhere(t *testing.T) {
	a := mustParse(t, "agents: [{id: 1}, {id: 5}]\n")
	b := mustParse(t, "uid_base: 3000000000\nagents: [{id: 5}, {id: 1}]\n")
	_, accA := Accounts(a)
	_, accB := Accounts(b)
	if accA[1].UID != 2000000005 || accB[1].UID != 3000000005 || accA[1].Name != "flock-5" {
		t.Errorf("uids %+v %+v", accA, accB)
	}
}

const passwd = `root:x:0:0:root:/root:/bin/bash
bob:x:1000:1000:Bob:/home/bob:/bin/bash
flock-1:x:2000000001:2000000001:flock agent 1:/srv/flock/agents/1:/usr/sbin/nologin
flock-9:x:1001:1001:someone else's flock-9:/home/f9:/bin/sh
thief:x:2000000002:100::/home/thief:/bin/sh
`

const group = `root:x:0:
bob:x:1000:
flock-1:x:2000000001:
flock:x:2000000000:flock-1
flock-9:x:1001:
stolen:x:2000000003:
`

func fixtureEtc(t *testing.T) etcDB {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "passwd"), []byte(passwd), 0o644)
	os.WriteFile(filepath.Join(dir, "group"), []byte(group), 0o644)
	db, err := readEtc(dir)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestAccountsAreOnlyOurs(t *testing.T) {
	got := fixtureEtc(t).accounts()
	if len(got) != 1 || got[0].Name != "flock-1" || got[0].UID != 2000000001 || strings.Join(got[0].Groups, ",") != "flock" {
		t.Errorf("accounts = %+v, want only flock-1 in group flock", got)
	}
}

func TestClaimRefusesWhatIsNotOurs(t *testing.T) {
	db := fixtureEtc(t)
	shared := Group{Name: "flock", GID: 2000000000}
	acct := func(id int, uid uint32) Account {
		return Account{Name: spec.UserName(id), UID: uid}
	}
	for _, tc := range []struct {
		name  string
		accts []Account
		want  string // "" for no conflict
	}{
		{"ours already", []Account{acct(1, 2000000001)}, ""},
		{"free", []Account{acct(4, 2000000004)}, ""},
		{"name held", []Account{acct(9, 2000000009)}, `user "flock-9" exists (uid 1001, comment "someone else's flock-9") and was not created by flock`},
		{"uid held", []Account{acct(2, 2000000002)}, `uid 2000000002 (for flock-2) is user "thief"; choose another uid_base`},
		{"gid held", []Account{acct(3, 2000000003)}, `gid 2000000003 (for flock-3) is group "stolen"; choose another uid_base`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := claim(db, shared, tc.accts)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected conflict: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			case tc.want != "" && !errors.Is(err, ErrNotOurs):
				t.Errorf("error %v does not match ErrNotOurs", err)
			}
		})
	}
	if err := claim(db, Group{Name: "flock", GID: 1000}, nil); err == nil || !strings.Contains(err.Error(), `gid 1000 (uid_base) is group "bob"`) {
		t.Errorf("shared gid held by bob: %v", err)
	}
}

func TestDefaultACLRoundTrips(t *testing.T) {
	dir := t.TempDir()
	if err := setDefaultGroupRW(dir, 4242); err != nil {
		if errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "not supported") {
			t.Skipf("file system of %s has no POSIX ACLs: %v", dir, err)
		}
		t.Fatal(err)
	}
	got, err := defaultGroupRW(dir)
	if err != nil || got == nil || *got != 4242 {
		t.Fatalf("defaultGroupRW = %v, %v; want 4242", got, err)
	}
	// A file created inside gets the group's rw whatever the umask.
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, err := getxattr(p, "system.posix_acl_access", buf)
	if err != nil || n == 0 {
		t.Errorf("file created in the dir has no access ACL: %v", err)
	}
}

// TestEnsurePathsOnDisk: a symlink where a directory belongs is refused,
// not followed (what the tree looks like after EnsurePaths, its repairs and
// the wrong types the fake knows too are userstest.Paths' steps).
func TestEnsurePathsOnDisk(t *testing.T) {
	// Tier: root.
	tier.RequireNeeds(t, "root", tier.Root("chowns to agent uids"))
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "flock")
	f := mustParse(t, "agents: [{id: 1}, {id: 2}]\n")
	f.Root = root // spec refuses /tmp for real flocks
	h := &System{}
	want := Paths(f)
	if err := h.EnsurePaths(ctx, want); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(f.AgentDir(2))
	os.Symlink("/etc", f.AgentDir(2))
	err := h.EnsurePaths(ctx, want)
	if err == nil || !strings.Contains(err.Error(), "is a symlink, not a directory") {
		t.Errorf("symlink in place of agents/2: %v", err)
	}
	if fi, _ := os.Stat("/etc"); fi.Mode().Perm() != 0o755 {
		t.Errorf("/etc mode changed to %s", fi.Mode())
	}
}

// An Existing path (an agent's bus seed, which the bus makes) is never
// created, only handed to its owner with its mode.
func TestEnsurePathsHandsOverButNeverCreatesExisting(t *testing.T) {
	// Tier: root.
	tier.RequireNeeds(t, "root", tier.Root("chowns to agent uids"))
	ctx := context.Background()
	seed := filepath.Join(t.TempDir(), "flock-1.nk")
	p := Path{Path: seed, UID: 2000000001, GID: 2000000001, Mode: 0o400, Existing: true}
	h := &System{}
	if err := h.EnsurePaths(ctx, []Path{p}); err == nil || !strings.Contains(err.Error(), "is missing, and it is not made here") {
		t.Errorf("missing seed: %v", err)
	}
	if _, err := os.Lstat(seed); err == nil {
		t.Errorf("EnsurePaths created %s", seed)
	}
	if err := os.WriteFile(seed, []byte("SUA\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.EnsurePaths(ctx, []Path{p}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := h.PathState(ctx, seed)
	if err != nil || !ok || got.UID != p.UID || got.GID != p.GID || got.Mode != p.Mode {
		t.Errorf("seed %+v, %v, %v; want %+v", got, ok, err, p)
	}
}

// Removing accounts rewrites each account file once: flock's users and
// their own groups go, they leave every other group, and nothing else
// changes (a foreign user who looks like ours, comments, a group someone
// else is still in).
func TestDeleteAccountsRewritesTheFilesOnce(t *testing.T) {
	// Tier: unit.
	dir := t.TempDir()
	ours := func(n, uid string) string {
		return n + ":x:" + uid + ":" + uid + ":" + CommentPrefix + " " + n + ":/srv/flock/agents/1:/usr/sbin/nologin\n"
	}
	files := map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/bash\n" + ours("flock-1", "2000000001") + ours("flock-2", "2000000002") +
			"flock-3:x:1003:1003:someone else's:/home/f3:/bin/sh\n",
		"shadow":  "root:*:19000:0:99999:7:::\nflock-1:!*:19000::::::\nflock-2:!*:19000::::::\nflock-3:!:19000::::::\n",
		"group":   "# kept\nroot:x:0:\nflock:x:2000000000:flock-1,flock-2\nflock-1:x:2000000001:\nflock-2:x:2000000002:alice\nflock-3:x:1003:\n",
		"gshadow": "root:*::\nflock:!*::flock-1,flock-2\nflock-1:!*::\nflock-2:!*:flock-1:alice\n",
	}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	s := &System{EtcDir: dir}
	if err := s.deleteAccounts(context.Background(), []string{"flock-1", "flock-2", "flock-3", "flock-9"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"passwd":  "root:x:0:0:root:/root:/bin/bash\nflock-3:x:1003:1003:someone else's:/home/f3:/bin/sh\n",
		"shadow":  "root:*:19000:0:99999:7:::\nflock-3:!:19000::::::\n",
		"group":   "# kept\nroot:x:0:\nflock:x:2000000000:\nflock-2:x:2000000002:alice\nflock-3:x:1003:\n",
		"gshadow": "root:*::\nflock:!*::\nflock-2:!*::alice\n",
	}
	for name, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != w {
			t.Errorf("%s:\n%s\nwant\n%s (%v)", name, b, w, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v, %v; want 0640 kept", name, fi.Mode(), err)
		}
	}
}
