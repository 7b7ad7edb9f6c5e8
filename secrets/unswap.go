package secrets

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Unswap reads r with each secret of b replaced by its placeholder: an
// answer that echoes a secret (a token's introspection, an error quoting
// the request) reaches the agent with the placeholder it sent. A secret
// split across reads is found: the end of what was read that begins a
// secret is held back until more come or r ends, and nothing else (an
// event stream's events reach the agent as they come). Placeholders have
// their secrets' length, so the length of the answer does not change.
func Unswap(r io.Reader, b Bindings) io.Reader {
	u := &unswapper{r: r}
	for _, x := range b {
		if len(x.Secret) == 0 || len(x.Secret) != len(x.Placeholder) {
			continue // not a binding Placeholder made: nothing to find
		}
		u.from = append(u.from, x.Secret)
		u.to = append(u.to, []byte(x.Placeholder))
		u.longest = max(u.longest, len(x.Secret))
	}
	return u
}

type unswapper struct {
	r        io.Reader
	from, to [][]byte
	longest  int
	in       []byte // read, not yet decided
	out      []byte // decided, not yet returned
	err      error  // r's, returned once in and out are empty
}

const readSize = 32 << 10

func (u *unswapper) Read(p []byte) (int, error) {
	if len(u.from) == 0 {
		return u.r.Read(p)
	}
	for len(u.out) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		n := len(u.in)
		u.in = slices.Grow(u.in, readSize)
		m, err := u.r.Read(u.in[n : n+readSize])
		u.in, u.err = u.in[:n+m], err
		u.scan(err != nil)
	}
	n := copy(p, u.out)
	u.out = u.out[n:]
	return n, nil
}

// scan moves to out what in holds that no secret can still begin in,
// each secret found replaced: at each position the earliest secret, the
// first of b on a tie, as a whole answer read at once would be. Unless
// final, only the end of in that could begin a secret is held back (the
// rest of an event stream reaches the agent as it comes), and a secret
// found is taken only if no secret could begin before it.
func (u *unswapper) scan(final bool) {
	in, i := u.in, 0
	u.out = u.out[:0]
	for {
		at, k := -1, -1
		for j, s := range u.from {
			if x := bytes.Index(in[i:], s); x >= 0 && (at < 0 || x < at) {
				at, k = x, j
			}
		}
		if at < 0 || !final && u.partial(in, i) <= i+at {
			break
		}
		u.out = append(u.out, in[i:i+at]...)
		u.out = append(u.out, u.to[k]...)
		i += at + len(u.from[k])
	}
	keep := 0
	if !final {
		keep = len(in) - u.partial(in, i)
	}
	u.out = append(u.out, in[i:len(in)-keep]...)
	u.in = append(u.in[:0], in[len(in)-keep:]...)
}

// partial is the first position from on where what in holds to its end
// begins a secret but is shorter than it; len(in) if none.
func (u *unswapper) partial(in []byte, from int) int {
	for p := max(from, len(in)-u.longest+1); p < len(in); p++ {
		for _, s := range u.from {
			if len(in)-p < len(s) && bytes.HasPrefix(s, in[p:]) {
				return p
			}
		}
	}
	return len(in)
}

// UnswapHeader replaces each secret of b in h's values with its
// placeholder, as it is and query-encoded (a Location that echoes it).
func UnswapHeader(h http.Header, b Bindings) {
	var pairs []string
	for _, x := range b {
		if len(x.Secret) == 0 {
			continue
		}
		pairs = append(pairs, string(x.Secret), x.Placeholder)
		if e := url.QueryEscape(string(x.Secret)); e != string(x.Secret) {
			pairs = append(pairs, e, url.QueryEscape(x.Placeholder))
		}
	}
	if len(pairs) == 0 {
		return
	}
	r := strings.NewReplacer(pairs...)
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = r.Replace(v)
		}
	}
}
