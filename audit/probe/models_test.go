package probe

// Tier: unit (the call as another uid: root).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flockrun/flock/proxy"
)

// A secret is found in an environment by its hash alone; a key file is
// read without its contents reaching the report.
func TestSecretOps(t *testing.T) {
	salt, secret := "s4lt", "sk-very-secret-1"
	h := SecretHash(salt, secret)
	r := Run(Request{Op: "secret-in-env", Name: salt, Data: h, Key: len(secret)}, time.Second)
	if r.OK {
		t.Errorf("found in the test's own environment: %s", r)
	}
	r = Run(Request{Op: "secret-in-env", Name: salt, Data: h, Key: len(secret), Env: []string{"A=1", "X_KEY=prefix" + secret + "suffix"}}, time.Second)
	if !r.OK || r.Detail != "the secret is in X_KEY" {
		t.Errorf("in a given environment: %s", r)
	}
	p := filepath.Join(t.TempDir(), "key")
	os.WriteFile(p, []byte(secret), 0o600)
	if r := Run(Request{Op: "read-secret", Path: p}, time.Second); !r.OK || strings.Contains(r.Detail+r.Err, secret) || r.Detail != "read 16 bytes" {
		t.Errorf("read-secret: %s", r)
	}
}

type connKey struct{}

// A model call is OK on a 2xx and fails with the gateway's message on
// anything else; as another uid (root only), its socket is that uid's,
// as the kernel tells the proxy.
func TestModelCall(t *testing.T) {
	var mu sync.Mutex
	lastUID := ""
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(connKey{}).(net.Conn)
		uid, err := proxy.SockDiag{}.UID(c.RemoteAddr().(*net.TCPAddr).AddrPort(), c.LocalAddr().(*net.TCPAddr).AddrPort())
		mu.Lock()
		lastUID = fmt.Sprint(uid, err)
		mu.Unlock()
		if r.URL.Path != "/granted/v1/models" {
			w.WriteHeader(403)
			fmt.Fprint(w, `{"type":"error","error":{"type":"permission_error","message":"flock proxy: agent 1 is not granted provider other"}}`)
			return
		}
		fmt.Fprint(w, `{"data":[]}`)
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
	srv.Start()
	defer srv.Close()
	if r := Run(Request{Op: "model-call", Addr: srv.URL + "/granted", Path: "/v1/models"}, time.Second); !r.OK {
		t.Errorf("a granted call: %s", r)
	}
	r := Run(Request{Op: "model-call", Addr: srv.URL + "/other", Path: "/v1/models"}, time.Second)
	if r.OK || r.Err != "HTTP 403 Forbidden: flock proxy: agent 1 is not granted provider other" {
		t.Errorf("a refused call: %s", r)
	}
	if os.Getuid() != 0 {
		t.Skip("a call as another uid needs root")
	}
	if r := Run(Request{Op: "model-call", Addr: srv.URL + "/granted", Path: "/v1/models", Key: 65534}, time.Second); !r.OK {
		t.Errorf("a call as uid 65534: %s", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if lastUID != "65534 <nil>" {
		t.Errorf("the call's socket: uid %s, want 65534", lastUID)
	}
}

// A burst refused at its first try (another request of the agent's held
// a little of its part) is tried again when its request says so, and
// reported refused when it does not.
func TestBurstTries(t *testing.T) {
	for _, tc := range []struct {
		tries int
		ok    bool
	}{{0, false}, {1, false}, {3, true}} {
		var calls atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 2 { // the first burst's second body
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, `{"error":{"message":"over its part"}}`)
				return
			}
			io.Copy(io.Discard, r.Body) // held until the client lets it go
		}))
		r := Run(Request{Op: "model-burst", Addr: srv.URL, Path: "/v1/messages", Size: 1 << 20, Count: 2, Tries: tc.tries}, 20*time.Second)
		srv.Close()
		if r.OK != tc.ok || (!tc.ok && !strings.Contains(r.Err, "1 refused before their end")) {
			t.Errorf("tries %d: %+v, want OK %v", tc.tries, r, tc.ok)
		}
	}
}
