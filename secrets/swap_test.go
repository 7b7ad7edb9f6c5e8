package secrets

// Unit tier.

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
)

const (
	ghSecret = "ghp_R8xkq2LmZ0aB7cD9eF1gH3iJ5kL7mN9oP1qZ"
	ghPH     = "ghp_Wm3Tt9QaZ4nR2bX8cV6yP0sL1dF5gH7jK2uE"
	seSecret = "se+cr/t=9"
	sePH     = "ab+cd/e=1"
)

func testBindings() Bindings {
	return Bindings{
		Bind(spec.Secret{Name: "github", Hosts: []string{"api.github.com:443", "github.com:443"},
			Inject: spec.Inject{BasicUser: "x-access-token"},
			Rules: spec.SecretRules{
				Allow: []spec.RequestRule{{Methods: []string{"GET", "POST"}, Path: "/repos/acme"}, {Path: "/user"}},
				Deny:  []spec.RequestRule{{Methods: []string{"DELETE"}, Path: "/"}, {Path: "/repos/acme/secret"}},
			}}, []byte(ghSecret), ghPH),
		Bind(spec.Secret{Name: "search", Hosts: []string{"api.search.example:443"}, Inject: spec.Inject{Query: "key"}}, []byte(seSecret), sePH),
	}
}

func TestSwap(t *testing.T) {
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	for _, tc := range []struct {
		name, method, url, host string
		header                  http.Header
		wantURL                 string
		wantHeader              http.Header
		want                    Outcome
		wantErr                 error
		wantRule                string
	}{
		{name: "a bearer header", method: "GET", url: "/repos/acme/x", host: "api.github.com:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}, "X-Other": {"a " + ghPH + " b"}}, wantURL: "/repos/acme/x",
			wantHeader: http.Header{"Authorization": {"Bearer " + ghSecret}, "X-Other": {"a " + ghSecret + " b"}}, want: Outcome{Swapped: []string{"github"}}},
		{name: "Basic auth, decoded and encoded", method: "POST", url: "/repos/acme/x.git/git-receive-pack", host: "GITHUB.com:443",
			header: http.Header{"Authorization": {basic("x-access-token", ghPH)}}, wantURL: "/repos/acme/x.git/git-receive-pack",
			wantHeader: http.Header{"Authorization": {basic("x-access-token", ghSecret)}}, want: Outcome{Swapped: []string{"github"}}},
		{name: "Basic auth, the placeholder the user", method: "GET", url: "/user", host: "api.github.com:443",
			header: http.Header{"Authorization": {basic(ghPH, "")}}, wantURL: "/user",
			wantHeader: http.Header{"Authorization": {basic(ghSecret, "")}}, want: Outcome{Swapped: []string{"github"}}},
		{name: "the query, percent-encoded, the rest as it was", method: "GET", url: "/q?a=%7E1&key=ab%2Bcd%2Fe%3D1&b", host: "api.search.example:443",
			header: http.Header{}, wantURL: "/q?a=%7E1&key=se%2Bcr%2Ft%3D9&b", wantHeader: http.Header{}, want: Outcome{Swapped: []string{"search"}}},
		{name: "the query, letters percent-encoded", method: "GET", url: "/q?k=%61b%2Bcd/e%3d1", host: "api.search.example:443",
			header: http.Header{}, wantURL: "/q?k=se%2Bcr%2Ft%3D9", wantHeader: http.Header{}, want: Outcome{Swapped: []string{"search"}}},
		{name: "injected as Basic auth", method: "GET", url: "/repos/acme/x", host: "api.github.com:443",
			header: http.Header{}, wantURL: "/repos/acme/x", wantHeader: http.Header{"Authorization": {basic("x-access-token", ghSecret)}}, want: Outcome{Injected: []string{"github"}}},
		{name: "injected in the query", method: "GET", url: "/q?x=1", host: "api.search.example:443",
			header: http.Header{}, wantURL: "/q?x=1&key=se%2Bcr%2Ft%3D9", wantHeader: http.Header{}, want: Outcome{Injected: []string{"search"}}},
		{name: "not injected over the agent's own", method: "GET", url: "/repos/acme/x", host: "api.github.com:443",
			header: http.Header{"Authorization": {"token other"}}, wantURL: "/repos/acme/x", wantHeader: http.Header{"Authorization": {"token other"}}},
		{name: "a host bound to none", method: "GET", url: "/x", host: "example.org:443",
			header: http.Header{"Accept": {"*/*"}}, wantURL: "/x", wantHeader: http.Header{"Accept": {"*/*"}}},
		{name: "a placeholder toward an unbound host", method: "GET", url: "/q", host: "api.search.example:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}}, wantErr: ErrUnboundHost},
		{name: "a placeholder in the query toward an unbound host", method: "GET", url: "/repos/acme/x?token=" + ghPH, host: "evil.example:443",
			header: http.Header{}, wantErr: ErrUnboundHost},
		{name: "a method outside allow", method: "PUT", url: "/repos/acme/x", host: "api.github.com:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}}, wantErr: ErrRuleDenied, wantRule: "no allow rule matches"},
		{name: "deny wins over allow", method: "DELETE", url: "/repos/acme/x", host: "api.github.com:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}}, wantErr: ErrRuleDenied, wantRule: "deny[0] DELETE /"},
		{name: "deny in another case", method: "GET", url: "/repos/ACME/Secret/issues", host: "api.github.com:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}}, wantErr: ErrRuleDenied, wantRule: "deny[1] any method /repos/acme/secret"},
		{name: "a path that climbs out", method: "GET", url: "/repos/acme/../other/x", host: "api.github.com:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}}, wantErr: ErrRuleDenied, wantRule: "no allow rule matches"},
		{name: "a path that climbs out, encoded", method: "GET", url: "/repos/acme/%2e%2e/other", host: "api.github.com:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}}, wantErr: ErrRuleDenied, wantRule: "no allow rule matches"},
		{name: "a prefix is whole segments", method: "GET", url: "/repos/acmecorp/x", host: "api.github.com:443",
			header: http.Header{"Authorization": {"Bearer " + ghPH}}, wantErr: ErrRuleDenied, wantRule: "no allow rule matches"},
		{name: "an injection is judged too", method: "PUT", url: "/repos/acme/x", host: "api.github.com:443",
			header: http.Header{}, wantErr: ErrRuleDenied, wantRule: "no allow rule matches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.url, strings.NewReader("body "+ghPH))
			req.Header = tc.header.Clone()
			before := req.Header.Clone()
			got, err := Swap(req, testBindings(), tc.host)
			if tc.wantErr != nil {
				var r *Refusal
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &r) || r.Rule != tc.wantRule {
					t.Fatalf("%v (%#v), want %v with rule %q", err, r, tc.wantErr, tc.wantRule)
				}
				if !reflect.DeepEqual(req.Header, before) || req.URL.String() != tc.url {
					t.Errorf("a refused request was changed: %v %s", req.Header, req.URL)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || req.URL.RequestURI() != tc.wantURL || !reflect.DeepEqual(req.Header, tc.wantHeader) {
				t.Errorf("got %+v %s %v\nwant %+v %s %v", got, req.URL.RequestURI(), req.Header, tc.want, tc.wantURL, tc.wantHeader)
			}
			// The body is the agent's content: never swapped.
			if b, _ := io.ReadAll(req.Body); string(b) != "body "+ghPH {
				t.Errorf("the body became %q", b)
			}
		})
	}
}
