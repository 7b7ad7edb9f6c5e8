package creds

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/secrets"
)

// Unit tier: the store in a temporary directory (its modes are the
// process's own, as root's would be).
func tempMaterial(t *testing.T) MaterialStore {
	t.Helper()
	d := t.TempDir()
	roots := filepath.Join(d, "roots.crt")
	if err := os.WriteFile(roots, []byte("-----BEGIN CERTIFICATE-----\nroots\n-----END CERTIFICATE-----"), 0o644); err != nil {
		t.Fatal(err)
	}
	sec := filepath.Join(d, "state", "secrets")
	return MaterialStore{Dir: sec, CAPath: filepath.Join(sec, "ca.pem"), KeyPath: filepath.Join(sec, "placeholder.key"),
		CertPath: filepath.Join(d, "etc", "ca.crt"), BundlePath: filepath.Join(d, "etc", "ca-bundle.crt"), Roots: roots,
		HandOverDir: filepath.Join(d, "run", "handover")}
}

// Unit tier: Ensure makes every file with its mode, once; what is deleted
// or loosened is repaired, and the key and CA are never replaced.
func TestMaterialStoreEnsure(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the material's directory must be root's (Problems checks the owner)")
	}
	ctx := context.Background()
	m := tempMaterial(t)
	if p, _ := m.Problems(ctx); len(p) == 0 {
		t.Fatal("no problems on an empty host")
	}
	if key, err := m.Key(ctx, false); err != nil || key != nil {
		t.Fatalf("Key without create on an empty host = %x, %v; want nil, nil", key, err)
	}
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := m.Problems(ctx); err != nil || len(p) != 0 {
		t.Fatalf("after Ensure: problems %v, %v", p, err)
	}
	for path, want := range map[string]os.FileMode{m.Dir: 0o700, m.KeyPath: 0o600, m.CAPath: 0o600, m.CertPath: 0o644, m.BundlePath: 0o644} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v; want %o", path, err, fi.Mode().Perm(), want)
		}
	}
	key, _ := m.Key(ctx, false)
	caPEM, _ := os.ReadFile(m.CAPath)
	bundle, _ := os.ReadFile(m.BundlePath)
	cert, _ := os.ReadFile(m.CertPath)
	if !bytes.HasPrefix(bundle, []byte("-----BEGIN CERTIFICATE-----\nroots\n-----END CERTIFICATE-----\n")) || !bytes.HasSuffix(bundle, cert) {
		t.Errorf("the bundle is not the roots then the CA's certificate:\n%s", bundle)
	}
	if _, err := secrets.LoadCA(caPEM, caPEM); err != nil {
		t.Errorf("the CA file does not load: %v", err)
	}

	for _, tc := range []struct {
		name   string
		break_ func()
		want   string
	}{
		{"bundle deleted", func() { os.Remove(m.BundlePath) }, m.BundlePath},
		{"certificate loosened", func() { os.Chmod(m.CertPath, 0o666) }, m.CertPath},
		{"key loosened", func() { os.Chmod(m.KeyPath, 0o644) }, m.KeyPath},
		{"roots updated", func() { os.WriteFile(m.Roots, []byte("new roots\n"), 0o644) }, m.BundlePath},
		{"CA deleted", func() { os.Remove(m.CAPath) }, m.CAPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.break_()
			p, err := m.Problems(ctx)
			if err != nil || p[tc.want] == "" {
				t.Fatalf("problems %v, %v; want one for %s", p, err, tc.want)
			}
			if err := m.Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			if p, _ := m.Problems(ctx); len(p) != 0 {
				t.Fatalf("after Ensure: %v", p)
			}
		})
	}
	if k, _ := m.Key(ctx, false); !bytes.Equal(k, key) {
		t.Error("the key was replaced")
	}
	if now, _ := os.ReadFile(m.CAPath); bytes.Equal(now, caPEM) {
		t.Error("a deleted CA was not made anew")
	}
	if now, _ := os.ReadFile(m.BundlePath); !bytes.HasPrefix(now, []byte("new roots\n")) {
		t.Errorf("the bundle was not rebuilt from the new roots: %q", now[:20])
	}
}

// Unit tier: a key of the wrong length is not the key; a missing one is
// made only when asked.
func TestMaterialStoreKey(t *testing.T) {
	ctx := context.Background()
	m := tempMaterial(t)
	k, err := m.Key(ctx, true)
	if err != nil || len(k) != KeySize {
		t.Fatalf("Key(create) = %d bytes, %v", len(k), err)
	}
	if again, _ := m.Key(ctx, true); !bytes.Equal(again, k) {
		t.Fatal("a second Key(create) replaced the key")
	}
	os.WriteFile(m.KeyPath, []byte("short"), 0o600)
	if k, err := m.Key(ctx, false); err != nil || k != nil {
		t.Fatalf("a short key read as %q, %v", k, err)
	}
	if _, err := m.Secret(ctx, filepath.Join(m.Dir, "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Fatalf("a missing secret: %v; want its path named", err)
	}
}

// Unit tier: the fake makes what is missing, and says what was broken.
func TestMaterialFake(t *testing.T) {
	ctx := context.Background()
	f := NewMaterialFake(nil)
	if p, _ := f.Problems(ctx); len(p) != len(materialPaths) {
		t.Fatalf("a new fake: %v", p)
	}
	f.Ensure(ctx)
	f.Break(materialPaths[3])
	p, _ := f.Problems(ctx)
	if got := slices.Collect(maps.Keys(p)); !slices.Equal(got, materialPaths[3:4]) {
		t.Fatalf("problems %v, want %v", got, materialPaths[3:4])
	}
}
