package spec

import (
	"fmt"
	"strconv"
	"strings"
)

// Names in egress are carried by flock's proxy, which only tunnels TLS
// (HTTP CONNECT): it checks that the ClientHello's SNI is the name the rule
// allows. Plain HTTP has no such check (the Host header is whatever the
// client writes, the address whatever DNS said), so it is not carried.

const nameExample = "e.g. api.example.com:443 or *.example.com:443"

// parseNameRule reads "NAME:PORT[/tcp]" or "*.DOMAIN:PORT[/tcp]". s is the
// whole rule as written, for messages.
func parseNameRule(s, host, port, proto string) (Egress, error) {
	bad := func(why string) (Egress, error) {
		return Egress{}, fmt.Errorf("%q %s; write a host name with its port, %s", s, why, nameExample)
	}
	if proto != "tcp" {
		return bad("is a name on " + proto + "; the proxy carries TLS over tcp only (write an address rule for " + proto + ")")
	}
	if port == "*" {
		return bad("has port *; a name rule allows one port")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return bad("has port " + strconv.Quote(port) + ", not 1-65535")
	}
	if p == 80 {
		return Egress{}, fmt.Errorf("%q is plain HTTP (port 80), which the proxy does not carry: without TLS it cannot check which name the client reaches; write the https name, e.g. %s:443", s, strings.TrimPrefix(host, "*."))
	}
	name := strings.ToLower(host)
	if name == "*" {
		return bad("allows every name; name the hosts")
	}
	if len(name) > 253 {
		return bad("has a name longer than 253 characters")
	}
	if strings.HasSuffix(name, ".") {
		return bad("ends in a dot; write the name without it")
	}
	labels := strings.Split(name, ".")
	wild := labels[0] == "*"
	if wild {
		labels = labels[1:]
	}
	if len(labels) < 2 {
		if wild {
			return bad("wildcards a whole top-level domain; write at least two labels after *.")
		}
		return bad("is a single label; write the fully qualified name")
	}
	for _, l := range labels {
		if strings.Contains(l, "*") {
			return bad("has * other than as its whole first label")
		}
		if err := checkLabel(l); err != "" {
			return bad(err)
		}
	}
	if tld := labels[len(labels)-1]; tld[0] >= '0' && tld[0] <= '9' {
		return bad("looks like an IP address but is not one (a name's last label does not start with a digit)")
	}
	return Egress{Name: name, Port: uint16(p), Proto: "tcp"}, nil
}

func checkLabel(l string) string {
	if l == "" {
		return "has an empty label (two dots in a row)"
	}
	if len(l) > 63 {
		return "has a label longer than 63 characters"
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return "has a label that starts or ends with -"
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "has " + strconv.QuoteRune(c) + ", not a letter, digit or -"
		}
	}
	return ""
}

// MatchName says whether the name rule e allows name on port: an exact
// name, or "*.example.com" for exactly one more leading label, as in
// certificates (not example.com itself, not a.b.example.com). name is
// compared without case; a trailing dot is not a match.
func (e Egress) MatchName(name string, port uint16) bool {
	if !e.IsName() || e.Port != port {
		return false
	}
	name = strings.ToLower(name)
	if rest, ok := strings.CutPrefix(e.Name, "*."); ok {
		label, tail, ok := strings.Cut(name, ".")
		return ok && tail == rest && label != "" && checkLabel(label) == ""
	}
	return name == e.Name
}

// isNameish says whether host is meant as a name, not an address: it has
// a letter or * and no ':' or '/' (IPv6 and CIDRs). "10.1.2.3.4" is not
// nameish and is refused as a bad address.
func isNameish(host string) bool {
	if strings.ContainsAny(host, ":/[]") {
		return false
	}
	for _, c := range host {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*' {
			return true
		}
	}
	return false
}
