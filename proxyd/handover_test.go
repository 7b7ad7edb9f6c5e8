package proxyd

// Unit tier (as root: a file of another uid's).

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flockrun/flock/spec"
)

// A secret rotated while the proxy runs reaches it at a reload, handed
// over by root: requests on new connections carry the new value, and
// the file is gone (root's confirmation). A symlink or another uid's
// file is refused and left; a config naming a secret it was never handed
// fails the reload, which keeps the policy, the value and the hand-over.
func TestReloadTakesHandedOverSecrets(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a file of another uid's needs root")
	}
	r := newRig(t)
	r.o.HandOverDir = filepath.Join(t.TempDir(), spec.HandOverDir)
	const old, rotated = "ghp_old_0123456789", "ghp_new_9876543210"
	var upstream atomic.Value
	upstream.Store(old)
	g := r.githubSecret(func() string { return upstream.Load().(string) }, old, "")
	s, err := Start(r.o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(r.o.HandOverDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the hand-over directory: %v, %v; want it made 0700", fi, err)
	}
	if got := g.get(s, "/v1/user"); got != http.StatusOK {
		t.Fatalf("before the rotation: %d", got)
	}
	upstream.Store(rotated)
	cred := filepath.Join(r.o.HandOverDir, spec.SecretCredential("github"))
	elsewhere := filepath.Join(t.TempDir(), "github")
	r.write(elsewhere, []byte(rotated))

	for _, tc := range []struct {
		name string
		put  func() error
	}{
		{"a symlink", func() error { return os.Symlink(elsewhere, cred) }},
		{"another uid's file", func() error {
			if err := os.WriteFile(cred, []byte(rotated), 0o400); err != nil {
				return err
			}
			return os.Chown(cred, 12345, 12345)
		}},
	} {
		if err := tc.put(); err != nil {
			t.Fatal(err)
		}
		if err := s.Reload(); err != nil {
			t.Fatalf("%s: reload: %v", tc.name, err)
		}
		if got := g.get(s, "/v1/user"); got != http.StatusUnauthorized {
			t.Errorf("%s handed over: %d, want the old value sent (401)", tc.name, got)
		}
		if _, err := os.Lstat(cred); err != nil {
			t.Errorf("%s: %v; want it refused and left", tc.name, err)
		}
		os.Remove(cred)
	}

	r.write(cred, []byte(rotated+"\n"))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := g.get(s, "/v1/user"); got != http.StatusOK {
		t.Errorf("handed over: %d, want the new value sent", got)
	}
	if _, err := os.Lstat(cred); !os.IsNotExist(err) {
		t.Errorf("handed over: %v; want the file taken", err)
	}

	// A secret granted that neither systemd nor root handed it.
	c := g.config
	c.Secrets = append(c.Secrets, spec.Secret{Name: "new", File: "/etc/flock/secrets/new", Hosts: []string{g.host}, Env: []string{"NEW"}})
	c.Placeholders[r.uid]["new"] = "n-0"
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r.write(r.o.ConfigPath, b)
	r.write(cred, []byte(old))
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "credential secret-new") || !strings.Contains(err.Error(), "the previous policy stays") {
		t.Errorf("reloading with a secret never handed over: %v", err)
	}
	if got := g.get(s, "/v1/user"); got != http.StatusOK {
		t.Errorf("after a failed reload: %d, want the value in force kept", got)
	}
	if _, err := os.Lstat(cred); err != nil {
		t.Errorf("after a failed reload: %v; want the hand-over left for the next", err)
	}
}
