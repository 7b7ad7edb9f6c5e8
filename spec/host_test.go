package spec

// Tier: unit.

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestWide(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		wide   bool
		block  string // the host block it lies inside, if any
	}{
		{"0.0.0.0/0", true, ""},
		{"::/0", true, ""},
		{"10.0.0.0/8", true, ""}, // the host's own addresses may be in it
		{"127.0.0.0/7", true, ""},
		{"fe80::/9", true, ""},
		{"10.1.2.3/32", false, ""}, // one address: named explicitly
		{"2001:db8::1/128", false, ""},
		{"127.0.0.1/32", false, "loopback"},
		{"127.0.0.0/8", false, "loopback"},
		{"127.1.0.0/16", false, "loopback"},
		{"169.254.169.254/32", false, "link-local"},
		{"224.0.0.0/24", false, "multicast"},
		{"::1/128", false, "loopback"},
		{"fe80::/64", false, "link-local"},
		{"ff02::/16", false, "multicast"},
		{"::ffff:127.0.0.0/104", true, ""}, // IPv4-mapped: the caller unmaps first
	} {
		p := netip.MustParsePrefix(tc.prefix)
		if got := Wide(p); got != tc.wide {
			t.Errorf("Wide(%s) = %v, want %v", p, got, tc.wide)
		}
		b, ok := InHostBlock(p)
		if ok != (tc.block != "") || b.Kind != tc.block {
			t.Errorf("InHostBlock(%s) = %+v, %v; want %q", p, b, ok, tc.block)
		}
	}
}

func TestParseEgressRefusesTheUnspecifiedAddress(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:443":        `"0.0.0.0:443" is the unspecified address, which the kernel sends to this host itself; write the address to reach, or 0.0.0.0/0:443/tcp for any address outside this host`,
		"[::]:*/udp":         `"[::]:*/udp" is the unspecified address, which the kernel sends to this host itself; write the address to reach, or [::/0]:*/udp for any address outside this host`,
		"[::ffff:0.0.0.0]:1": `"[::ffff:0.0.0.0]:1" is the unspecified address, which the kernel sends to this host itself; write the address to reach, or 0.0.0.0/0:1/tcp for any address outside this host`,
	} {
		if _, err := ParseEgress(in); err == nil || err.Error() != want {
			t.Errorf("ParseEgress(%q):\n got %v\nwant %s", in, err, want)
		}
	}
	for _, ok := range []string{"0.0.0.0/0:443", "[::/0]:*", "0.0.0.1:1"} {
		if _, err := ParseEgress(ok); err != nil {
			t.Errorf("ParseEgress(%q): %v", ok, err)
		}
	}
}

func TestWarnings(t *testing.T) {
	f, err := Parse([]byte(`agents:
  - id: 3
    egress: ["0.0.0.0/0:*", "127.0.0.1:8080", "10.0.0.5:22", "[::1]:*/udp"]
  - id: 4
    egress: ["169.254.169.254:80", "10.0.0.0/8:*", "224.0.0.251:5353/udp"]
  - id: 5
    env: {ANTHROPIC_API_KEY: sk-x, GITHUB_TOKEN_FILE: /srv/t, LOG_LEVEL: debug, db_password: x}
`))
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{
		"agent 5: env.ANTHROPIC_API_KEY looks like a secret, and a unit's environment is readable by every user of this host (systemctl show); put it in a file in the agent's directory and give the file's path instead",
		"agent 5: env.db_password looks like a secret, and a unit's environment is readable by every user of this host (systemctl show); put it in a file in the agent's directory and give the file's path instead",
	}
	for _, tc := range []struct {
		name  string
		local []netip.Addr
		want  []string
	}{{
		name: "spec only",
		want: []string{
			"agent 3 may reach 127.0.0.1:8080/tcp on this host: egress[1] names a loopback address explicitly",
			"agent 3 may reach [::1]:*/udp on this host: egress[3] names a loopback address explicitly",
			"agent 4 may reach 169.254.169.254:80/tcp on this host: egress[0] names a link-local address explicitly",
			"agent 4 may reach 224.0.0.251:5353/udp on this host: egress[2] names a multicast address explicitly",
			secrets[0], secrets[1],
		},
	}, {
		name:  "the host's own addresses",
		local: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.5"), netip.MustParseAddr("10.0.0.6")},
		want: []string{
			"agent 3 may reach 127.0.0.1:8080/tcp on this host: egress[1] names a loopback address explicitly",
			"agent 3 may reach 10.0.0.5:22/tcp on this host: egress[2] names one of this host's own addresses explicitly",
			"agent 3 may reach [::1]:*/udp on this host: egress[3] names a loopback address explicitly",
			"agent 4 may reach 169.254.169.254:80/tcp on this host: egress[0] names a link-local address explicitly",
			"agent 4 may reach 224.0.0.251:5353/udp on this host: egress[2] names a multicast address explicitly",
			secrets[0], secrets[1],
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.Warnings(tc.local); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Warnings:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}
