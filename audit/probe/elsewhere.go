package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/flockrun/flock/spec"
)

// Send is the request "secret-elsewhere" makes on an intercepted
// connection: GET Path (never HEAD: an answer to it has no body, where
// flock-proxy's refusal is told), addressed to Host, carrying the value of
// the variable Var (a secret's placeholder) where Inject says, or with no
// place named, as a bearer token in Authorization (where SDKs send it).
// No Var: no credential (flock-proxy injects the secret where its inject
// says).
type Send struct {
	Host   string      `json:"host"`
	Path   string      `json:"path"`
	Var    string      `json:"var,omitempty"`
	Inject spec.Inject `json:"inject,omitzero"`
	// RulesRefuse: a refusal by the secret's rules is a success too. It
	// is the control of a secret whose rules allow no request the audit
	// would send: flock-proxy intercepted the connection and judged the
	// request as the secret's, which is what the control is to prove.
	RulesRefuse bool `json:"rules_refuse,omitempty"`
}

// ErrNotSent: the probe had nothing to send (its variable is not in the
// environment), so its failure proves nothing.
var ErrNotSent = errors.New("nothing sent")

// secretElsewhere sends a placeholder where flock-proxy must not make it
// its secret: CONNECT r.Addr through HTTPS_PROXY (as uid r.Key; 0: the
// process's own), TLS for r.Addr's name (no certificate check: the proxy
// is under test), then r.Send. Variables are read from r.Env (a
// control's), then the process's environment (the agent's unit's).
//
// OK: the request was carried upstream: any answer but flock-proxy's own
// refusal (a real API's 401 or 404, or flock-proxy's 502 when the host
// failed it). The error is flock-proxy's refusal, its status and line; a
// CONNECT refused says the placeholder went nowhere.
func secretElsewhere(ctx context.Context, r Request) (string, error) {
	s := r.Send
	if s == nil {
		return "", fmt.Errorf("%w: no request to send", ErrNotSent)
	}
	env := func(name string) string {
		for i := len(r.Env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(r.Env[i], name+"="); ok {
				return v
			}
		}
		return os.Getenv(name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.Addr+s.Path, nil)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	req.Host, req.Close = s.Host, true
	p := ""
	if s.Var != "" {
		p = env(s.Var)
		if p == "" {
			return "", fmt.Errorf("%w: no %s in the environment", ErrNotSent, s.Var)
		}
		carry(req, s.Inject, p)
	}
	addr, err := proxyAddr(env)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	sni, _, err := net.SplitHostPort(r.Addr)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	c, err := dialProxy(ctx, r.Key, addr)
	if err != nil {
		return "", fmt.Errorf("the proxy at %s: %w", addr, err)
	}
	defer c.Close()
	tc, err := tunnel(ctx, c, r.Addr, sni)
	if ce := (*connectError)(nil); errors.As(err, &ce) {
		return "", fmt.Errorf("CONNECT %s refused, so the placeholder went nowhere: %w", r.Addr, err)
	} else if err != nil {
		return "", err
	}
	if err := req.Write(tc); err != nil {
		return "", fmt.Errorf("GET %s through the tunnel: %w", s.Path, err)
	}
	res, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		return "", fmt.Errorf("GET %s through the tunnel: %w", s.Path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	answer := strings.TrimSuffix(res.Status+": "+line, ": ")
	if p != "" { // an answer that echoes it: the report shows no placeholder
		answer = strings.ReplaceAll(answer, p, "(placeholder)")
	}
	switch {
	case !refusal(res.StatusCode, line):
		return "carried upstream: " + answer, nil
	case s.RulesRefuse && res.StatusCode == http.StatusForbidden && !strings.Contains(line, "is not bound to"):
		return "judged by the secret's rules: " + answer, nil
	}
	return "", errors.New(answer)
}

// refusal says whether an answer is flock-proxy's own refusal of a
// request on an intercepted connection (a 421 for another name, a 403
// for a secret's host or rules), which it never sends upstream.
func refusal(status int, line string) bool {
	return (status == http.StatusMisdirectedRequest || status == http.StatusForbidden) &&
		strings.HasPrefix(line, "flock proxy: agent ") && strings.Contains(line, ": refused: ")
}

// carry puts placeholder p in req where in says, else as a bearer token.
func carry(req *http.Request, in spec.Inject, p string) {
	switch {
	case in.Header != "":
		req.Header.Set(in.Header, in.Prefix+p)
	case in.BasicUser != "":
		req.SetBasicAuth(in.BasicUser, p)
	case in.Query != "":
		req.URL.RawQuery = url.QueryEscape(in.Query) + "=" + url.QueryEscape(p)
	default:
		req.Header.Set("Authorization", "Bearer "+p)
	}
}
