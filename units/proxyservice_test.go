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

// flock-proxy.service keeps systemd's exposure at 2.0 or below, without
// PrivateUsers= (sock_diag must see the agents' real uids).
func TestProxyServiceExposure(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze")
	}
	f := filepath.Join(t.TempDir(), ProxyUnit)
	if err := os.WriteFile(f, ProxyService("", "", "/etc/flock/proxy.json", "/var/lib/flock/creds/proxy.nk"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", f).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Skipf("systemd-analyze security --offline: %v\n%s", err, out)
	}
	if v, _ := strconv.ParseFloat(string(m[1]), 64); v > 2.0 {
		t.Errorf("exposure %s, want <= 2.0\n%s", m[1], out)
	}
	if regexp.MustCompile(`(?m)^PrivateUsers=`).Match(ProxyService("", "", "x", "y")) {
		t.Error("PrivateUsers= hides the agents' uids from sock_diag")
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
