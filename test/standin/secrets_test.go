// Tier: unit. The stand-in of the secrets' APIs: each host wants its real
// secret where its clients send it, anything else is a 401, and what it
// records of a credential never holds a secret.
package standin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

const (
	ghSecret   = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	restSecret = "sr_live_0123456789"
)

func TestSecretsWantsEachSecretWhereItsClientsSendIt(t *testing.T) {
	// Unit tier.
	s := &Secrets{GitHub: ghSecret, REST: restSecret, Backend: "/nonexistent/git-http-backend"}
	srv := httptest.NewTLSServer(s)
	defer srv.Close()
	for _, tc := range []struct {
		name, method, host, path, auth string
		basic                          [2]string
		status                         int
		body                           string // in the answer
		seen                           string // the credential recorded
	}{
		{"gh's token", "GET", "gh.flock.test", "/api/v3/user", "token " + ghSecret, [2]string{}, 200, `"login":"flock-test-user"`, "token <secret github>"},
		{"gh's token as a bearer", "GET", "gh.flock.test", "/api/v3/user", "Bearer " + ghSecret, [2]string{}, 200, `"login"`, "Bearer <secret github>"},
		{"gh with a placeholder", "GET", "gh.flock.test", "/api/v3/user", "token ghp_placeholder", [2]string{}, 401, "Bad credentials", "token ghp_placeholder"},
		{"gh with the REST API's secret", "GET", "gh.flock.test", "/api/v3/user", "token " + restSecret, [2]string{}, 401, "Bad credentials", "token <secret rest>"},
		{"the REST API echoes its token", "POST", "rest.flock.test", "/v1/x?a=b", "Bearer " + restSecret, [2]string{}, 200, `"token":"` + restSecret + `"`, "Bearer <secret rest> ?a=b"},
		{"the REST API outside /v1", "GET", "rest.flock.test", "/v2/x", "Bearer " + restSecret, [2]string{}, 404, "not found", "Bearer <secret rest>"},
		{"the REST API without a token", "GET", "elsewhere.flock.test", "/v1/x", "", [2]string{}, 401, "invalid token", ""},
		{"git without a credential", "GET", "git.flock.test", "/acme/repo.git/info/refs?service=git-upload-pack", "", [2]string{}, 401, "Authentication failed", "?service=git-upload-pack"},
		{"git with a placeholder", "GET", "git.flock.test", "/acme/repo.git/info/refs", "", [2]string{"x-access-token", "ghp_placeholder"}, 401, "Authentication failed", "Basic x-access-token:ghp_placeholder"},
		{"git with another user", "GET", "git.flock.test", "/acme/repo.git/info/refs", "", [2]string{"someone", ghSecret}, 401, "Authentication failed", "Basic someone:<secret github>"},
		// The token right: handed to the backend (here none, so the CGI fails).
		{"git with the token", "GET", "git.flock.test", "/acme/repo.git/info/refs", "", [2]string{"x-access-token", ghSecret}, 500, "", "Basic x-access-token:<secret github>"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		if tc.basic[0] != "" {
			req.SetBasicAuth(tc.basic[0], tc.basic[1])
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, res.StatusCode, b, tc.status, tc.body)
		}
		if res.StatusCode == 401 && res.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: a 401 without WWW-Authenticate (git asks for a credential only after one)", tc.name)
		}
		seen := s.Seen()
		last := seen[len(seen)-1]
		want := SeenRequest{Host: tc.host, Method: tc.method, Path: strings.SplitN(tc.path, "?", 2)[0], Proto: "HTTP/1.1", Credential: tc.seen, Status: tc.status}
		if !reflect.DeepEqual(last, want) {
			t.Errorf("%s: recorded %+v, want %+v", tc.name, last, want)
		}
	}
	// The record as a test reads it: no secret in it.
	res, err := srv.Client().Get(srv.URL + "/standin/seen")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var seen []SeenRequest
	if err := json.Unmarshal(b, &seen); err != nil || len(seen) != 11 {
		t.Fatalf("GET /standin/seen: %v, %d requests:\n%s", err, len(seen), b)
	}
	if strings.Contains(string(b), ghSecret) || strings.Contains(string(b), restSecret) || !strings.Contains(string(b), "<secret github>") {
		t.Errorf("GET /standin/seen shows a secret, or not where it was:\n%s", b)
	}
}
