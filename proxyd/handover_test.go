package proxyd

// Unit tier (as root: a file of another uid's).

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/test/standin"
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

// A model API's key rotated while the proxy runs reaches the gateway at
// a reload, handed over by root as a secret is: the upstream is sent the
// new key and never the old again, and the file is gone. A reload with
// nothing handed over keeps the key in force.
func TestReloadTakesHandedOverModelKey(t *testing.T) {
	r := newRig(t)
	r.o.HandOverDir = filepath.Join(t.TempDir(), spec.HandOverDir)
	const rotated = "sk-ant-rotated-9876543210"
	// The provider takes either key and records which it was sent.
	var mu sync.Mutex
	var sent []string
	takes := map[string]http.Handler{key: &standin.Server{AnthropicKey: key}, rotated: &standin.Server{AnthropicKey: rotated}}
	upstream := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		k := req.Header.Get("X-Api-Key")
		mu.Lock()
		sent = append(sent, k)
		mu.Unlock()
		if h, ok := takes[k]; ok {
			h.ServeHTTP(w, req)
			return
		}
		http.Error(w, "unknown key", http.StatusUnauthorized)
	}))
	upstream.StartTLS()
	t.Cleanup(upstream.Close)
	r.upstream = upstream
	r.write(filepath.Join(r.o.CredentialsDir, gateway.CACredential("anth")), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw}))
	r.config("127.0.0.1:0", true)
	s, err := Start(r.o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// sentSince are the keys the provider was sent since call n.
	sentSince := func(n int) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sent[n:])
	}
	calls := func(n int) []string {
		t.Helper()
		before := len(sentSince(0))
		for range n {
			if status, body := r.call(s); status != http.StatusOK {
				t.Fatalf("a granted request: %d %s", status, body)
			}
		}
		return sentSince(before)
	}
	if got := calls(1); !slices.Equal(got, []string{key}) {
		t.Fatalf("before the rotation the provider was sent %q, want the key", got)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := calls(1); !slices.Equal(got, []string{key}) {
		t.Errorf("reloaded with nothing handed over, the provider was sent %q, want the key in force", got)
	}

	cred := filepath.Join(r.o.HandOverDir, gateway.KeyCredential("anth"))
	r.write(cred, []byte(rotated+"\n"))
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := calls(3); !slices.Equal(got, []string{rotated, rotated, rotated}) {
		t.Errorf("after the hand-over the provider was sent %q, want the rotated key alone", got)
	}
	if _, err := os.Lstat(cred); !os.IsNotExist(err) {
		t.Errorf("handed over: %v; want the file taken", err)
	}
}
