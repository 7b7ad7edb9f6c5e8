package secrets

// Unit tier.

import (
	"bytes"
	"crypto/rand"
	"regexp"
	"strings"
	"testing"
)

func TestPlaceholderIsShapedLikeItsSecret(t *testing.T) {
	for _, tc := range []struct {
		name, secret, prefix string
		format               *regexp.Regexp // the check an SDK or a scanner makes; nil: none
	}{
		{"classic GitHub", "ghp_R8xkq2LmZ0aB7cD9eF1gH3iJ5kL7mN9oP1qZ", "ghp_", regexp.MustCompile(`^ghp_[A-Za-z0-9]{36}$`)},
		{"GitHub OAuth", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_", regexp.MustCompile(`^gho_[A-Za-z0-9]{36}$`)},
		{"fine-grained GitHub", "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghi", "github_pat_", regexp.MustCompile(`^github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}$`)},
		{"Anthropic", "sk-ant-api03-Zq8xW2vY4uT6sR8qP0oN2mL4kJ6iH8gF0eD2cB4aZ6yX8wV0uT2sR4qP6oN8mL0kJ2iH4gF6eD8cB0aZ2yX4wV-AbCdEfAA", "sk-ant-api03-", regexp.MustCompile(`^sk-ant-api03-[A-Za-z0-9_-]{93}AA$`)},
		{"OpenAI", "sk-proj-abcDEF123ghiJKL456mnoPQR789stuVWX", "sk-proj-", regexp.MustCompile(`^sk-proj-[A-Za-z0-9]{33}$`)},
		{"Slack bot", "xoxb-1234567890-9876543210987-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-", regexp.MustCompile(`^xoxb-[0-9]{10}-[0-9]{13}-[A-Za-z0-9]{24}$`)},
		{"AWS key id", "AKIAIOSFODNN7EXAMPLE", "AKIA", regexp.MustCompile(`^AKIA[A-Z0-9]{16}$`)},
		{"40 hex", "3f786850e387550fdab836ed7e6dc881de23001b", "", regexp.MustCompile(`^[0-9a-f]{40}$`)},
		{"a JWT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "eyJ", regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)},
		{"a UUID: no prefix copied", "9f3c2a1b-7d4e-4f6a-8b9c-0d1e2f3a4b5c", "", regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)},
		{"one character", "k", "", regexp.MustCompile(`^[a-z]$`)},
		{"one digit", "7", "", regexp.MustCompile(`^[0-9]$`)},
		{"a prefix alone", "ghp_", "", nil},
		{"no letter or digit", "-_-", "", nil},
	} {
		for range 20 {
			p := Placeholder([]byte(tc.secret), rand.Reader)
			if p == tc.secret || len(p) != len(tc.secret) || !strings.HasPrefix(p, tc.prefix) {
				t.Fatalf("%s: Placeholder(%q) = %q: want another value of its length, beginning %q", tc.name, tc.secret, p, tc.prefix)
			}
			if tc.format != nil && (!tc.format.MatchString(tc.secret) || !tc.format.MatchString(p)) {
				t.Fatalf("%s: %q (secret %q) and its format %s: both must match", tc.name, p, tc.secret, tc.format)
			}
			if tc.format == nil {
				continue
			}
			for i := range p {
				if got, want := classOf(p[i], false), classOf(tc.secret[i], false); got != want || want == "" && p[i] != tc.secret[i] {
					t.Fatalf("%s: %q's character %d is %q, the secret's %q: not of its class", tc.name, p, i, p[i], tc.secret[i])
				}
			}
		}
	}
}

// A placeholder drawn as the secret itself is moved on, so a one-character
// secret is never its own placeholder even when the random bytes say so.
func TestPlaceholderNeverTheSecret(t *testing.T) {
	for _, secret := range []string{"a", "0", "Z", "ab"} {
		// Bytes that draw each character as the secret's own (its index
		// in its class).
		var b []byte
		for i := range len(secret) {
			b = append(b, byte(strings.IndexByte(classOf(secret[i], false), secret[i])))
		}
		if p := Placeholder([]byte(secret), bytes.NewReader(b)); p == secret || len(p) != len(secret) {
			t.Errorf("Placeholder(%q) = %q", secret, p)
		}
	}
}

// Stream gives the same placeholder for the same key and label, another
// for another label.
func TestStreamIsStable(t *testing.T) {
	secret := []byte("ghp_R8xkq2LmZ0aB7cD9eF1gH3iJ5kL7mN9oP1qZ")
	a := Placeholder(secret, Stream([]byte("k"), "agent 1, github"))
	b := Placeholder(secret, Stream([]byte("k"), "agent 1, github"))
	c := Placeholder(secret, Stream([]byte("k"), "agent 2, github"))
	if a != b || a == c {
		t.Errorf("the same key and label: %q and %q (want equal); another label: %q (want another)", a, b, c)
	}
}
