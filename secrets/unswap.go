package secrets

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Unswap reads r with each secret of b replaced by its placeholder: an
// answer that echoes a secret (a token's introspection, an error quoting
// the request) reaches the agent with the placeholder it sent. A secret
// split across reads is found: the end of what was read that begins a
// secret is held back until more come or r ends, and nothing else (an
// event stream's events reach the agent as they come). Placeholders have
// their secrets' length, so the length of the answer does not change,
// and a secret is replaced where it lies: the bytes read go to the
// reader's buffer once, scanned once per secret, with no copy of their
// own (a download through the proxy costs its scan, nothing more).
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
	u.next = make([]int, len(u.from))
	return u
}

type unswapper struct {
	r        io.Reader
	from, to [][]byte
	longest  int
	next     []int  // scan's: where each secret is next found
	held     []byte // the end of what was read that may begin a secret
	own      []byte // a read's buffer when the reader's is too small
	ready    []byte // decided, in own, not yet returned
	err      error  // r's, returned once held is given back
}

// ownSize is own's: the reads of a reader whose buffer cannot hold what
// is held back and more.
const ownSize = 4 << 10

func (u *unswapper) Read(p []byte) (int, error) {
	if len(u.from) == 0 {
		return u.r.Read(p)
	}
	if len(u.ready) > 0 {
		n := copy(p, u.ready)
		u.ready = u.ready[n:]
		return n, nil
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Read into p when it holds what is held back with room to spare
	// (as io.Copy's buffer does), else into own and copy.
	buf, direct := p, len(p) >= 2*u.longest
	if !direct {
		if u.own == nil {
			u.own = make([]byte, max(ownSize, 2*u.longest))
		}
		buf = u.own
	}
	for {
		if u.err != nil && len(u.held) == 0 {
			return 0, u.err
		}
		n := copy(buf, u.held)
		if u.err == nil {
			m, err := u.r.Read(buf[n:])
			n, u.err = n+m, err
		}
		decided := u.scan(buf[:n], u.err != nil)
		u.held = append(u.held[:0], buf[decided:n]...)
		if decided == 0 {
			continue // all of it may begin a secret, or nothing came
		}
		if direct {
			return decided, nil
		}
		u.ready = buf[:decided]
		n = copy(p, u.ready)
		u.ready = u.ready[n:]
		return n, nil
	}
}

// scan replaces in in each secret found with its placeholder and says
// how much of in is decided: at each position the earliest secret, the
// first of b on a tie, as a whole answer read at once would be. Unless
// final, the end of in that could begin a secret is not decided (the
// rest of an event stream reaches the agent as it comes), and a secret
// found is taken only if no secret could begin before it.
func (u *unswapper) scan(in []byte, final bool) int {
	for j, s := range u.from {
		u.next[j] = index(in, 0, s)
	}
	i := 0
	for {
		at, k := -1, -1
		for j, x := range u.next {
			if x >= 0 && (at < 0 || x < at) {
				at, k = x, j
			}
		}
		if at < 0 || !final && u.partial(in, i) <= at {
			break
		}
		copy(in[at:], u.to[k])
		i = at + len(u.from[k])
		for j, x := range u.next {
			if x >= 0 && x < i {
				u.next[j] = index(in, i, u.from[j])
			}
		}
	}
	if final {
		return len(in)
	}
	return u.partial(in, i)
}

// index is where s is first found in in from from on; -1 if nowhere.
func index(in []byte, from int, s []byte) int {
	if x := bytes.Index(in[from:], s); x >= 0 {
		return from + x
	}
	return -1
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
