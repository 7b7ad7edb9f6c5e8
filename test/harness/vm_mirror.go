package harness

// The Debian mirror the host's apt already uses: the VM image is built from
// it and from nowhere else.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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
