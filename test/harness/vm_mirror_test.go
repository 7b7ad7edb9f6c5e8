package harness

import (
	"slices"
	"strings"
	"testing"
)

// Tier: unit. What a build takes from the host's apt, and what its log
// says of it.
func TestParseAptDump(t *testing.T) {
	dump := `Acquire "";
Acquire::http "";
Acquire::http::Proxy "http://ops:s3cret@proxy.example:3128/";
Acquire::http::Proxy::deb.debian.org "DIRECT";
Acquire::https::Proxy "DIRECT";
Acquire::http::Proxy-Auto-Detect "/usr/local/bin/find-proxy";
Acquire::Check-Valid-Until "false";
Acquire::Retries "3";
Acquire::cdrom::mount "/media/cdrom/";
APT::Architecture "amd64";
`
	a := parseAptDump("http://mirror.example/debian", dump)
	wantConf := []string{
		`Acquire::http::Proxy "http://ops:s3cret@proxy.example:3128/";`,
		`Acquire::http::Proxy::deb.debian.org "DIRECT";`,
		`Acquire::https::Proxy "DIRECT";`,
		`Acquire::Check-Valid-Until "false";`,
		`Acquire::Retries "3";`,
	}
	if got := strings.Split(strings.TrimSpace(a.Conf), "\n"); !slices.Equal(got, wantConf) {
		t.Errorf("conf:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantConf, "\n"))
	}
	if want := []string{"http_proxy=http://ops:s3cret@proxy.example:3128/"}; !slices.Equal(a.Env, want) {
		t.Errorf("env %q, want %q", a.Env, want)
	}
	if s := a.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "http://mirror.example/debian via http_proxy=http://ops@proxy.example:3128/") {
		t.Errorf("log line %q: want the mirror and the proxy, without its password", s)
	}
	if s := parseAptDump("http://m/debian", "").String(); s != "http://m/debian" {
		t.Errorf("no proxy: %q", s)
	}
}
