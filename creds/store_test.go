package creds

// Tier: unit (no root). The Identities contract both implementations keep
// is identitiesConformance's; these are Store's files.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nkeys"
)

// TestStoreOnDisk checks the files: modes, format, repaired modes, files
// that are not seeds ignored.
//
// Tier: unit (no root).
func TestStoreOnDisk(t *testing.T) {
	ctx := context.Background()
	s := Store{Dir: filepath.Join(t.TempDir(), "lib", "creds")}
	pub, _, err := s.Ensure(ctx, "flock-3")
	if err != nil {
		t.Fatal(err)
	}
	if s.Path("flock-3") != filepath.Join(s.Dir, "flock-3.nk") {
		t.Errorf("Path %s", s.Path("flock-3"))
	}
	checkModes := func(when string) {
		t.Helper()
		for p, want := range map[string]os.FileMode{s.Dir: os.ModeDir | DirMode, s.Path("flock-3"): 0o600} {
			if fi, err := os.Lstat(p); err != nil || fi.Mode() != want {
				t.Errorf("%s: %s has mode %v (%v), want %v", when, p, fi.Mode(), err, want)
			}
		}
	}
	checkModes("created")
	data, err := os.ReadFile(s.Path("flock-3"))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSuffix(string(data), "\n")))
	if !strings.HasPrefix(string(data), "SU") || !strings.HasSuffix(string(data), "\n") || err != nil {
		t.Fatalf("seed file %q: %v", data, err)
	}
	if p, _ := kp.PublicKey(); p != pub {
		t.Errorf("seed's key %s, Ensure said %s", p, pub)
	}

	// Modes loosened by hand are repaired; the key stays.
	if err := os.Chmod(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.Path("flock-3"), 0o644); err != nil {
		t.Fatal(err)
	}
	if again, created, err := s.Ensure(ctx, "flock-3"); err != nil || created || again != pub {
		t.Fatalf("Ensure after chmod: %s, %v, %v", again, created, err)
	}
	checkModes("repaired")

	// Only *.nk files with identity names are seeds.
	for _, name := range []string{"notes.txt", ".flock-4.nk123", "junk.nk"} {
		if err := os.WriteFile(filepath.Join(s.Dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := s.Keys(ctx); err != nil || len(keys) != 1 || keys["flock-3"] != pub {
		t.Errorf("Keys = %v, %v", keys, err)
	}
}

// TestSeedModes checks what Ensure leaves of a seed's mode: the group may
// read the reader's alone (the readers' group is its group), and no one
// else may read any.
//
// Tier: unit (no root).
func TestSeedModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		mode, want os.FileMode
	}{
		{ReaderName, 0o640, 0o640},
		{ReaderName, 0o644, 0o640},
		{ReaderName, 0o666, 0o640},
		{ReaderName, 0o600, 0o600},
		{OperatorName, 0o640, 0o600},
		{ProxyName, 0o604, 0o600},
		{"flock-2", 0o440, 0o400},
	} {
		t.Run(fmt.Sprintf("%s %o", tc.name, tc.mode), func(t *testing.T) {
			s := Store{Dir: filepath.Join(t.TempDir(), "creds")}
			if _, _, err := s.Ensure(ctx, tc.name); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(s.Path(tc.name), tc.mode); err != nil {
				t.Fatal(err)
			}
			if _, created, err := s.Ensure(ctx, tc.name); err != nil || created {
				t.Fatalf("Ensure again: created %v, %v", created, err)
			}
			if fi, err := os.Stat(s.Path(tc.name)); err != nil || fi.Mode().Perm() != tc.want {
				t.Errorf("mode %v (%v), want %v", fi.Mode().Perm(), err, tc.want)
			}
		})
	}
}

// TestStoreRefuses checks what the store will not use: symlinks and other
// non-files in place of the directory or a seed, damaged seeds.
//
// Tier: unit (no root).
func TestStoreRefuses(t *testing.T) {
	ctx := context.Background()
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s Store) // s.Dir does not exist yet
		want  string
	}{
		{"symlink for the directory", func(t *testing.T, s Store) {
			must(t, os.Symlink(t.TempDir(), s.Dir))
		}, "is a symlink, not a directory"},
		{"file for the directory", func(t *testing.T, s Store) {
			must(t, os.WriteFile(s.Dir, nil, 0o600))
		}, "is a file, not a directory"},
		{"symlink for a seed", func(t *testing.T, s Store) {
			must(t, os.Mkdir(s.Dir, 0o700))
			other := filepath.Join(t.TempDir(), "seed")
			seed, _ := mustUser(t).Seed()
			must(t, os.WriteFile(other, seed, 0o600))
			must(t, os.Symlink(other, s.Path("flock-1")))
		}, "is a symlink; delete it and provision again"},
		{"directory for a seed", func(t *testing.T, s Store) {
			must(t, os.MkdirAll(s.Path("flock-1"), 0o700))
		}, "is a directory, not a file; delete it and provision again"},
		{"fifo for a seed", func(t *testing.T, s Store) {
			must(t, os.Mkdir(s.Dir, 0o700))
			must(t, syscall.Mkfifo(s.Path("flock-1"), 0o600))
		}, "is a special file, not a file; delete it and provision again"},
		{"damaged seed", func(t *testing.T, s Store) {
			must(t, os.Mkdir(s.Dir, 0o700))
			must(t, os.WriteFile(s.Path("flock-1"), []byte("SUAGARBAGE\n"), 0o600))
		}, "flock-1.nk is damaged (not a user nkey seed); delete it and provision again"},
		{"empty seed", func(t *testing.T, s Store) {
			must(t, os.Mkdir(s.Dir, 0o700))
			must(t, os.WriteFile(s.Path("flock-1"), nil, 0o600))
		}, "flock-1.nk is damaged"},
		{"an account's seed", func(t *testing.T, s Store) {
			must(t, os.Mkdir(s.Dir, 0o700))
			must(t, os.WriteFile(s.Path("flock-1"), append(accountSeed, '\n'), 0o600))
		}, "flock-1.nk is damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Store{Dir: filepath.Join(t.TempDir(), "creds")}
			tc.setup(t, s)
			before := regularContent(s.Path("flock-1"))
			if _, _, err := s.Ensure(ctx, "flock-1"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Ensure: %v, want it to say %q", err, tc.want)
			}
			if _, err := s.Keys(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Keys: %v, want it to say %q", err, tc.want)
			}
			if after := regularContent(s.Path("flock-1")); after != before {
				t.Errorf("the seed was replaced")
			}
		})
	}
}

// regularContent is what a regular file holds, "" for anything else (a
// fifo would block the reader).
func regularContent(path string) string {
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	data, _ := os.ReadFile(path)
	return string(data)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustUser(t *testing.T) nkeys.KeyPair {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	return kp
}
