package standin

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"strings"
	"sync"
)

// Secrets stands in for the APIs an agent's secrets are for, each by the
// first label of the request's host:
//
//	git.*    git's smart HTTP (git http-backend, Backend) of the bare
//	         repositories under GitRoot, for Basic auth
//	         x-access-token:GitHub, as GitHub takes a token
//	gh.*     GitHub's API as gh reaches an Enterprise host: GET
//	         /api/v3/user, for "Authorization: token GitHub" (or Bearer)
//	else     a REST API under /v1/, for "Authorization: Bearer REST";
//	         its answer echoes the token it was sent, as an API that
//	         shows its caller the key does
//
// A request without its secret is a 401 with WWW-Authenticate, as the
// real ones answer. GET /standin/seen on any host answers every request
// it had ([]SeenRequest, JSON).
type Secrets struct {
	GitRoot, Backend string
	GitHub, REST     string // the secrets

	mu   sync.Mutex
	seen []SeenRequest
}

// SeenRequest is one request Secrets had.
type SeenRequest struct {
	Host, Method, Path string
	Proto              string `json:",omitempty"` // HTTP/1.1 or HTTP/2.0: what its client spoke
	// Credential is its Authorization (Basic decoded to user:password)
	// and its query after a ?, each secret in them written <secret
	// NAME>: what it was sent, never a secret, so a test may print it.
	Credential string
	Status     int
}

func (s *Secrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/standin/seen" {
		s.mu.Lock()
		defer s.mu.Unlock()
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // <secret NAME> as it is
		enc.Encode(s.seen)
		return
	}
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	switch label, _, _ := strings.Cut(host, "."); label {
	case "git":
		s.git(rec, r)
	case "gh":
		s.github(rec, r)
	default:
		s.rest(rec, r)
	}
	s.mu.Lock()
	s.seen = append(s.seen, SeenRequest{Host: host, Method: r.Method, Path: r.URL.Path, Proto: r.Proto, Credential: s.redact(credential(r)), Status: rec.status})
	s.mu.Unlock()
}

// Seen is every request s had.
func (s *Secrets) Seen() []SeenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SeenRequest(nil), s.seen...)
}

func (s *Secrets) git(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok || user != "x-access-token" || !same(pass, s.GitHub) {
		w.Header().Set("WWW-Authenticate", `Basic realm="flock test git"`)
		http.Error(w, "Authentication failed", http.StatusUnauthorized)
		return
	}
	if r.ContentLength < 0 && r.Body != nil {
		// A chunked push: the CGI is handed CONTENT_LENGTH.
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	}
	h := &cgi.Handler{Path: s.Backend, Env: []string{"GIT_PROJECT_ROOT=" + s.GitRoot, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user}}
	h.ServeHTTP(w, r)
}

func (s *Secrets) github(w http.ResponseWriter, r *http.Request) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	w.Header().Set("Content-Type", "application/json")
	if (!strings.EqualFold(scheme, "token") && !strings.EqualFold(scheme, "bearer")) || !same(token, s.GitHub) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="GitHub"`)
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`+"\n")
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/api/v3/user" {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"message":"Not Found"}`+"\n")
		return
	}
	io.WriteString(w, `{"login":"flock-test-user","id":38,"type":"User"}`+"\n")
}

func (s *Secrets) rest(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !same(token, s.REST):
		w.Header().Set("WWW-Authenticate", `Bearer realm="flock test"`)
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid token"})
	case !strings.HasPrefix(r.URL.Path, "/v1/"):
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]string{"error": "not found"})
	default:
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "method": r.Method, "path": r.URL.Path, "token": token})
	}
}

// same says whether v is secret (set), in constant time.
func same(v, secret string) bool {
	return secret != "" && subtle.ConstantTimeCompare([]byte(v), []byte(secret)) == 1
}

// redact writes each secret in v as <secret NAME>.
func (s *Secrets) redact(v string) string {
	for _, x := range []struct{ name, secret string }{{"github", s.GitHub}, {"rest", s.REST}} {
		if x.secret != "" {
			v = strings.ReplaceAll(v, x.secret, "<secret "+x.name+">")
		}
	}
	return v
}

// credential is where a request carries a credential: its
// Authorization, Basic decoded, and its raw query.
func credential(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	if scheme, enc, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "basic") {
		if dec, err := base64.StdEncoding.DecodeString(enc); err == nil {
			auth = "Basic " + string(dec)
		}
	}
	if r.URL.RawQuery != "" {
		return strings.TrimSpace(auth + " ?" + r.URL.RawQuery)
	}
	return auth
}

// statusRecorder keeps the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets the CGI's answer stream.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
