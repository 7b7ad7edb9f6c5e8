package spec

import (
	"strings"
	"testing"
)

func TestParseEgressNames(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"api.example.com:443", "api.example.com:443"},
		{"API.Example.COM:443/tcp", "api.example.com:443"},
		{"*.githubusercontent.com:443", "*.githubusercontent.com:443"},
		{"xn--bcher-kva.example:8443", "xn--bcher-kva.example:8443"},
	} {
		e, err := ParseEgress(c.in)
		if err != nil {
			t.Errorf("ParseEgress(%q): %v", c.in, err)
			continue
		}
		if !e.IsName() || e.String() != c.want || e.Prefix.IsValid() {
			t.Errorf("ParseEgress(%q) = %+v (%s), want name rule %s", c.in, e, e, c.want)
		}
	}
}

func TestParseEgressRefusesBadNames(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"*:443", "allows every name; name the hosts"},
		{"*.com:443", "wildcards a whole top-level domain"},
		{"a.*.example.com:443", "has * other than as its whole first label"},
		{"a*.example.com:443", "has * other than as its whole first label"},
		{"**.example.com:443", "has * other than as its whole first label"},
		{"example.com", "has no port"},
		{"example.com:", `has port "", not 1-65535`},
		{"example.com:*", "has port *; a name rule allows one port"},
		{"example.com:0", `has port "0"`},
		{"example.com:65536", `has port "65536"`},
		{"example.com:443/udp", "the proxy carries TLS over tcp only"},
		{"example.com:80", "is plain HTTP (port 80), which the proxy does not carry: without TLS it cannot check which name the client reaches; write the https name, e.g. example.com:443"},
		{"*.example.com:80", "write the https name, e.g. example.com:443"},
		{"http://example.com:80", "is plain HTTP, which the proxy does not carry"},
		{"HTTP://example.com", "is plain HTTP, which the proxy does not carry"},
		{"https://example.com:443", "has a scheme; write the name and port alone"},
		{"localhost:443", "is a single label; write the fully qualified name"},
		{"example.com.:443", "ends in a dot"},
		{"a..example.com:443", "has an empty label"},
		{"-a.example.com:443", "starts or ends with -"},
		{"a_b.example.com:443", `has '_', not a letter, digit or -`},
		{strings.Repeat("a", 64) + ".example.com:443", "label longer than 63"},
		{strings.Repeat("abcdefghi.", 26) + "com:443", "longer than 253"},
		{"1.2.3.4.5:443", "is not an address"},
		{"10.1.2.300:443", "is not an address"},
		{"a.0x7f:443", "looks like an IP address but is not one"},
		{"1.2.3.4a:443", "looks like an IP address but is not one"},
		{"example.1:443", "looks like an IP address but is not one"},
	} {
		_, err := ParseEgress(c.in)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseEgress(%q): got %v, want it to say %q", c.in, err, c.why)
		}
	}
}

func TestMatchName(t *testing.T) {
	exact, _ := ParseEgress("api.example.com:443")
	wild, _ := ParseEgress("*.example.com:443")
	addr, _ := ParseEgress("10.1.2.3:443")
	for _, c := range []struct {
		rule Egress
		name string
		port uint16
		want bool
	}{
		{exact, "api.example.com", 443, true},
		{exact, "API.example.COM", 443, true},
		{exact, "api.example.com", 8443, false},
		{exact, "api.example.com.", 443, false},
		{exact, "x.api.example.com", 443, false},
		{exact, "apiexample.com", 443, false},
		{wild, "a.example.com", 443, true},
		{wild, "example.com", 443, false},
		{wild, ".example.com", 443, false},
		{wild, "a.b.example.com", 443, false},
		{wild, "aexample.com", 443, false},
		{wild, "a.example.com.evil.org", 443, false},
		{wild, "a_b.example.com", 443, false},
		{wild, "a.example.com", 444, false},
		{addr, "10.1.2.3", 443, false},
	} {
		if got := c.rule.MatchName(c.name, c.port); got != c.want {
			t.Errorf("%s.MatchName(%q, %d) = %v, want %v", c.rule, c.name, c.port, got, c.want)
		}
	}
}
