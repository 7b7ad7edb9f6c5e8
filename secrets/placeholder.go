package secrets

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"strings"
)

// knownPrefixes are the public prefixes of well-known credentials, which
// SDKs and secret scanners check: a placeholder keeps its secret's, longest
// first. A table rather than "everything up to the last - or _": a token
// that merely has dashes (a UUID, 8-4-4-4-12 hex) would hand its first
// groups to the agent verbatim.
var knownPrefixes = []string{
	"sk-ant-admin01-", "sk-ant-api03-", "sk-svcacct-", "github_pat_", "sk-proj-",
	"sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_",
	"dop_v1_", "sk-ant-", "glpat-", "pypi-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xapp-",
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_", "AKIA", "ASIA", "AIza", "hf_", "sk-", "SG.", "eyJ",
}

// knownSuffixes are the public endings of credentials with a known
// prefix, kept as the prefix is (Anthropic's keys end in AA).
var knownSuffixes = map[string]string{"sk-ant-api03-": "AA", "sk-ant-admin01-": "AA"}

// Placeholder is a worthless value shaped like secret, for the agent to
// hold in its place: its known prefix and suffix (knownPrefixes), then at each
// position a character of the same class drawn from rand, a digit for a
// digit, a lower-case letter for one, an upper-case for one; anything else
// (-, _, ., /, +, =) is kept, so a format check that passes the secret
// (ghp_ and 36 alphanumerics, three dot-separated parts) passes it too.
// The letters of a secret that is hex after its prefix stay hex. It has
// the secret's length, so swapping one for the other never changes a
// body's length, and it is never the secret. It tells whoever holds it
// the secret's length and which class each character is (about 1.5 of
// the 6 bits of a random alphanumeric one), nothing more. rand must not
// fail (crypto/rand.Reader, or Stream); if it does, Placeholder panics.
func Placeholder(secret []byte, rand io.Reader) string {
	s := string(secret)
	prefix := ""
	for _, p := range knownPrefixes {
		if strings.HasPrefix(s, p) && len(s) > len(p) {
			prefix = p
			break
		}
	}
	end := len(s)
	if suf := knownSuffixes[prefix]; suf != "" && strings.HasSuffix(s, suf) && len(s) > len(prefix)+len(suf) {
		end -= len(suf)
	}
	hex := isHex(s[len(prefix):end])
	out := []byte(s)
	last := -1 // the last position drawn
	for i := len(prefix); i < end; i++ {
		if class := classOf(s[i], hex); class != "" {
			out[i] = class[draw(rand, len(class))]
			last = i
		}
	}
	switch {
	case string(out) != s:
	case last >= 0:
		// Drawn as the secret itself: the next character of its class.
		class := classOf(s[last], hex)
		out[last] = class[(strings.IndexByte(class, s[last])+1)%len(class)]
	default:
		// Nothing to draw (no letter or digit): a placeholder of another
		// shape, never the secret.
		for i := range out {
			out[i] = alnum[draw(rand, len(alnum))]
		}
		if string(out) == s {
			out[0] = 'x'
		}
	}
	return string(out)
}

const (
	digits = "0123456789"
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alnum  = digits + lower + upper
)

// classOf is the characters c is drawn from; "" to keep it.
func classOf(c byte, hex bool) string {
	switch {
	case c >= '0' && c <= '9':
		return digits
	case hex && c >= 'a' && c <= 'f':
		return lower[:6]
	case hex && c >= 'A' && c <= 'F':
		return upper[:6]
	case c >= 'a' && c <= 'z':
		return lower
	case c >= 'A' && c <= 'Z':
		return upper
	}
	return ""
}

// isHex says whether s's letters and digits are all hex, with a letter
// among them and no g-z (a random alphanumeric token almost never is).
func isHex(s string) bool {
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F':
			letter = true
		case c >= 'g' && c <= 'z' || c >= 'G' && c <= 'Z':
			return false
		}
	}
	return letter
}

// draw is a uniform number in [0, n) from rand (n <= 256): a byte, drawn
// again when it falls in the last, short round.
func draw(rand io.Reader, n int) int {
	var b [1]byte
	for {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			panic("secrets: reading random bytes: " + err.Error())
		}
		if int(b[0]) < 256-256%n {
			return int(b[0]) % n
		}
	}
}

// Stream is an endless reader of bytes derived from key and label
// (HMAC-SHA256 of label and a counter): the same for the same pair, so a
// placeholder drawn from it is the same at every provision, and a unit
// holding it does not change. key must be kept as a secret is, or the
// placeholders can be foretold (which gains nothing but their shape).
func Stream(key []byte, label string) io.Reader {
	return &stream{mac: hmac.New(sha256.New, key), label: label}
}

type stream struct {
	mac   hash.Hash
	label string
	n     uint64
	buf   []byte
}

func (s *stream) Read(p []byte) (int, error) {
	for len(s.buf) < len(p) {
		s.mac.Reset()
		s.mac.Write([]byte(s.label))
		s.mac.Write(binary.BigEndian.AppendUint64(nil, s.n))
		s.n++
		s.buf = s.mac.Sum(s.buf)
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}
