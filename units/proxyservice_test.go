package units

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// flock's own services keep systemd's exposure low. flock-proxy.service
// is at 2.0 or below without PrivateUsers= (sock_diag must see the
// agents' real uids); the counters' reader at 1.3, all of it what reading
// the host's nftables takes: CAP_NET_ADMIN (0.2), the host's network
// namespace (0.5) and user namespace (0.2), in whose own namespaces it
// would read a table of their own; and ProtectClock='s rtc (0.1).
func TestServiceExposure(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze")
	}
	for _, tc := range []struct {
		name    string
		text    []byte
		max     float64
		without []string // lines that would break what the unit does
	}{
		{ProxyUnit, ProxyService("", "", "/etc/flock/proxy.json", "/var/lib/flock/creds/proxy.nk", ProxySecrets{}), 2.0, []string{"PrivateUsers="}},
		{"flock-counters@1.service", CountersService(""), 1.3, []string{"PrivateUsers=", "PrivateNetwork="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(f, tc.text, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("systemd-analyze", "security", "--offline=true", f).CombinedOutput()
			m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
			if m == nil {
				t.Skipf("systemd-analyze security --offline: %v\n%s", err, out)
			}
			if v, _ := strconv.ParseFloat(string(m[1]), 64); v > tc.max {
				t.Errorf("exposure %s, want <= %.1f\n%s", m[1], tc.max, out)
			}
			for _, w := range tc.without {
				if regexp.MustCompile(`(?m)^` + w).Match(tc.text) {
					t.Errorf("%s has %s", tc.name, w)
				}
			}
		})
	}
}

// The static-unit methods touch flock's own units only.
func TestStaticUnitsAreOurs(t *testing.T) {
	f := NewFake()
	ctx := context.Background()
	if err := f.InstallService(ctx, "sshd.service", []byte("x")); err == nil {
		t.Error("InstallService of sshd.service accepted")
	}
	if err := f.RemoveService(ctx, "../flock.service"); err == nil {
		t.Error("RemoveService of ../flock.service accepted")
	}
	if err := f.InstallService(ctx, ProxyUnit, []byte("x")); err != nil {
		t.Error(err)
	}
	if err := f.ReloadService(ctx, ProxyUnit); err == nil {
		t.Error("reload of a proxy that is not running accepted")
	}
}

// Unit tier. Two flock-proxy.service files differ in what is handed
// over alone when only the digests and the secrets' and model APIs'
// credentials do; the secrets' CA's, the command or anything else is
// more.
func TestProxySecretsChange(t *testing.T) {
	sec := func(digest, models string, names ...string) ProxySecrets {
		ps := ProxySecrets{Digest: digest, ModelsDigest: models}
		for _, n := range names {
			ps.Creds = append(ps.Creds, [2]string{"secret-" + n, "/etc/flock/secrets/" + n})
		}
		ps.Creds = append(ps.Creds, [2]string{"secrets-ca", "/var/lib/flock/secrets/ca.pem"})
		return ps
	}
	anth := [2]string{"model-key-anth", "/etc/flock/keys/anth"}
	corp := [][2]string{{"model-ca-corp", "/etc/flock/keys/corp-ca.pem"}, {"model-key-corp", "/etc/flock/keys/corp"}}
	unit := func(bin string, ps ProxySecrets, models ...[2]string) []byte {
		return ProxyService(bin, "", "/etc/flock/proxy.json", "/var/lib/flock/creds/proxy.nk", ps, models...)
	}
	was := unit("", sec("aa", "cc", "github"), anth)
	for _, tc := range []struct {
		name string
		now  []byte
		ok   bool
		want ProxyHandOver
	}{
		{"the same", unit("", sec("aa", "cc", "github"), anth), false, ProxyHandOver{}},
		{"a value changed", unit("", sec("bb", "cc", "github"), anth), true, ProxyHandOver{Secrets: true}},
		{"a secret granted", unit("", sec("bb", "cc", "github", "search"), anth), true, ProxyHandOver{Secrets: true, SecretCreds: true}},
		{"a model API's key changed", unit("", sec("aa", "dd", "github"), anth), true, ProxyHandOver{Models: true}},
		{"a model API added, with its CA", unit("", sec("aa", "dd", "github"), append([][2]string{anth}, corp...)...), true, ProxyHandOver{Models: true, ModelCreds: true}},
		{"a secret and a key changed", unit("", sec("bb", "dd", "github"), anth), true, ProxyHandOver{Secrets: true, Models: true}},
		{"its command changed", unit("/opt/flockctl", sec("bb", "cc", "github"), anth), false, ProxyHandOver{}},
		{"no secrets left (the CA too)", unit("", ProxySecrets{ModelsDigest: "cc"}, anth), false, ProxyHandOver{}},
		{"no model API left", unit("", sec("aa", "", "github")), false, ProxyHandOver{}},
	} {
		if got, ok := ProxySecretsChange(was, tc.now); ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if got := ProxyModelsDigest(was); got != "cc" {
		t.Errorf("the models' digest read back: %q, want cc", got)
	}
}
