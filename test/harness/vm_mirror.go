package harness

// The Debian mirror the host's apt already uses: the VM image is built from
// it and from nowhere else.

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// debianMirror returns the URI of the first apt source that serves
// vmSuite's main component, from /etc/apt/sources.list and
// sources.list.d (one-line and deb822 formats). FLOCK_VM_MIRROR overrides.
func debianMirror() (string, error) {
	if m := os.Getenv("FLOCK_VM_MIRROR"); m != "" {
		return m, nil
	}
	files := []string{"/etc/apt/sources.list"}
	for _, pat := range []string{"*.list", "*.sources"} {
		more, _ := filepath.Glob(filepath.Join("/etc/apt/sources.list.d", pat))
		files = append(files, more...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var uri string
		if strings.HasSuffix(f, ".sources") {
			uri = mirrorDeb822(string(b))
		} else {
			uri = mirrorOneLine(string(b))
		}
		if uri != "" {
			return strings.TrimRight(uri, "/"), nil
		}
	}
	return "", fmt.Errorf("no apt source serves %s main in %v (set FLOCK_VM_MIRROR to a Debian mirror)", vmSuite, files)
}

// mirrorOneLine reads "deb [opts] URI SUITE COMPONENTS..." lines.
func mirrorOneLine(text string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) > 0 {
				f = f[1:]
			}
		}
		if len(f) >= 3 && f[1] == vmSuite && slices.Contains(f[2:], "main") {
			return f[0]
		}
	}
	return ""
}

// mirrorDeb822 reads stanzas of Types/URIs/Suites/Components.
func mirrorDeb822(text string) string {
	for _, stanza := range strings.Split(text, "\n\n") {
		fields := map[string][]string{}
		for _, l := range strings.Split(stanza, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.Fields(v)
			}
		}
		if slices.Contains(fields["types"], "deb") && slices.Contains(fields["suites"], vmSuite) &&
			slices.Contains(fields["components"], "main") && len(fields["uris"]) > 0 {
			return fields["uris"][0]
		}
	}
	return ""
}

// hostApt is what a build's debootstrap and apt take from the host's apt
// besides the mirror, so that a machine behind its own mirror or proxy
// builds as it installs packages: the proxies, and the checks the host
// relaxes (a mirror that serves a snapshot needs Check-Valid-Until false).
type hostApt struct {
	Mirror string
	Conf   string   // apt.conf lines for the tree's apt
	Env    []string // http_proxy and https_proxy for debootstrap
}

// aptKeep are the apt settings a build takes from the host.
var aptKeep = regexp.MustCompile(`^Acquire::((https?|ftp)::Proxy(::\S+)?|Check-Valid-Until|Check-Date|Retries|ForceIPv4|ForceIPv6) "`)

func hostAptConfig() (hostApt, error) {
	mirror, err := debianMirror()
	if err != nil {
		return hostApt{}, err
	}
	out, err := exec.Command("apt-config", "dump").Output()
	if err != nil {
		return hostApt{Mirror: mirror}, fmt.Errorf("apt-config dump: %w", err)
	}
	return parseAptDump(mirror, string(out)), nil
}

// parseAptDump keeps what aptKeep names from `apt-config dump`.
func parseAptDump(mirror, dump string) hostApt {
	a := hostApt{Mirror: mirror}
	var conf strings.Builder
	for _, l := range strings.Split(dump, "\n") {
		if !aptKeep.MatchString(l) {
			continue
		}
		conf.WriteString(l + "\n")
		for _, scheme := range []string{"http", "https"} {
			if v, ok := strings.CutPrefix(l, "Acquire::"+scheme+"::Proxy \""); ok {
				if v = strings.TrimSuffix(v, "\";"); v != "" && v != "DIRECT" {
					a.Env = append(a.Env, scheme+"_proxy="+v)
				}
			}
		}
	}
	a.Conf = conf.String()
	return a
}

// String says where a build's packages come from, for its log; a proxy's
// password is not printed.
func (a hostApt) String() string {
	s := a.Mirror
	for i, kv := range a.Env {
		if i == 0 {
			s += " via"
		}
		k, v, _ := strings.Cut(kv, "=")
		if u, err := url.Parse(v); err == nil && u.User != nil {
			u.User = url.User(u.User.Username())
			v = u.String()
		}
		s += " " + k + "=" + v
	}
	return s
}
