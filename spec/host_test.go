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
		"agent 5: env.ANTHROPIC_API_KEY looks like a secret, and a unit's environment is readable by every user of this host (systemctl show); put it in a file in the agent's directory and give the file's path instead (a model API's key: name the API under providers: and grant it in models:, and the key stays with flock-proxy)",
		"agent 5: env.db_password looks like a secret, and a unit's environment is readable by every user of this host (systemctl show); put it in a file in the agent's directory and give the file's path instead (a model API's key: name the API under providers: and grant it in models:, and the key stays with flock-proxy)",
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

func TestWarningsClusterPort(t *testing.T) {
	eg := func(s string) Egress {
		e, err := ParseEgress(s)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	f := &Flock{
		Hosts: []Host{{Name: "a", Address: netip.MustParseAddr("10.77.0.11")}, {Name: "b", Address: netip.MustParseAddr("fd00:77::12")}},
		Agents: []Agent{{ID: 3, Host: "a", Egress: []Egress{
			eg("10.77.0.11:6222"),        // a's cluster port: warned, not "may reach"
			eg("[fd00:77::12]:6222"),     // b's
			eg("10.77.0.11:*"),           // any port: the cluster port is not named
			eg("10.77.0.12:6222"),        // no host's address
			eg("10.77.0.0/24:6222"),      // a range names no host
			eg("[fd00:77::12]:6222/udp"), // the cluster port is tcp
		}}},
	}
	want := []string{
		"agent 3: egress[0] 10.77.0.11:6222/tcp is host a's cluster port, which only the buses use: the firewall refuses it",
		"agent 3: egress[1] [fd00:77::12]:6222/tcp is host b's cluster port, which only the buses use: the firewall refuses it",
		"agent 3 may reach 10.77.0.11:*/tcp on this host: egress[2] names one of this host's own addresses explicitly",
	}
	local := []netip.Addr{netip.MustParseAddr("10.77.0.11")}
	if got := f.Warnings(local); !reflect.DeepEqual(got, want) {
		t.Errorf("Warnings:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	f.Bus.ClusterPort = 7222 // another port: 6222 is then nobody's
	if got := f.Warnings(local); len(got) != 2 || !strings.Contains(got[0], "may reach 10.77.0.11:6222/tcp") || got[1] != want[2] {
		t.Errorf("cluster_port 7222: Warnings = %q, want the two 'may reach' lines", got)
	}
	f.Hosts = f.Hosts[:1] // one host: no cluster, no cluster port
	f.Bus.ClusterPort = 0
	if got := f.Warnings(local); len(got) != 2 || !strings.Contains(got[0], "may reach 10.77.0.11:6222/tcp") {
		t.Errorf("one host: Warnings = %q, want the two 'may reach' lines", got)
	}
}
