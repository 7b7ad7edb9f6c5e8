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
// split across reads is found: the last len(longest)-1 bytes read are held
// back until more come or r ends. Placeholders have their secrets'
// length, so the length of the answer does not change.
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
// final, a secret is taken only where every secret could be seen whole.
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
		if at < 0 || !final && i+at+u.longest > len(in) {
			break
		}
		u.out = append(u.out, in[i:i+at]...)
		u.out = append(u.out, u.to[k]...)
		i += at + len(u.from[k])
	}
	keep := 0
	if !final {
		keep = min(len(in)-i, u.longest-1)
	}
	u.out = append(u.out, in[i:len(in)-keep]...)
	u.in = append(u.in[:0], in[len(in)-keep:]...)
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
