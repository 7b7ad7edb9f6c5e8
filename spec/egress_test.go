package spec

// Tier: unit.

import (
	"reflect"
	"testing"
)

func TestEgressRoundTrips(t *testing.T) {
	for _, s := range []string{"10.1.2.3:443/tcp", "192.0.2.0/24:53/udp", "[2001:db8::1]:443/tcp", "[2001:db8::/32]:*/udp", "api.example.com:443", "*.githubusercontent.com:443", "a-1.b2.example:8443"} {
		e, err := ParseEgress(s)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if e.String() != s {
			t.Errorf("ParseEgress(%q).String() = %q", s, e.String())
		}
	}
}

// TestSplitEgress: every rule lands in exactly one half, in the spec's
// order, and an agent reaches the proxy exactly when it has a name.
func TestSplitEgress(t *testing.T) {
	for _, c := range []struct {
		name         string
		in           []string
		addrs, names []string
	}{
		{"none", nil, nil, nil},
		{"addresses only", []string{"10.1.2.3:443/tcp", "[2001:db8::/32]:*/udp"}, []string{"10.1.2.3:443/tcp", "[2001:db8::/32]:*/udp"}, nil},
		{"names only", []string{"api.example.com:443", "*.example.org:8443"}, nil, []string{"api.example.com:443", "*.example.org:8443"}},
		{"mixed, order kept", []string{"b.example.com:443", "192.0.2.0/24:53/udp", "a.example.com:443", "10.0.0.0/8:*/tcp"},
			[]string{"192.0.2.0/24:53/udp", "10.0.0.0/8:*/tcp"}, []string{"b.example.com:443", "a.example.com:443"}},
	} {
		var eg []Egress
		for _, s := range c.in {
			e, err := ParseEgress(s)
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			eg = append(eg, e)
		}
		addrs, names := SplitEgress(eg)
		if addrs == nil || names == nil {
			t.Errorf("%s: a nil half (%v, %v)", c.name, addrs, names)
		}
		if got := egressStrings(addrs); !reflect.DeepEqual(got, c.addrs) {
			t.Errorf("%s: addrs %q, want %q", c.name, got, c.addrs)
		}
		if got := egressStrings(names); !reflect.DeepEqual(got, c.names) {
			t.Errorf("%s: names %q, want %q", c.name, got, c.names)
		}
		for _, e := range addrs {
			if e.IsName() {
				t.Errorf("%s: name %s among the addresses", c.name, e)
			}
		}
		if has := (Agent{Egress: eg}).HasNames(); has != (len(c.names) > 0) {
			t.Errorf("%s: HasNames() = %v", c.name, has)
		}
	}
}

func egressStrings(eg []Egress) []string {
	var out []string
	for _, e := range eg {
		out = append(out, e.String())
	}
	return out
}
