package creds

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/flockrun/flock/internal/fsutil"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

// Material is the OS boundary of the secrets' material (docs/secrets.md):
// the placeholder key every agent's placeholders (and flock-proxy's
// digests) are drawn from, flock-proxy's CA, the CA's certificate and the
// bundle agents trust, and the operator's secret and model key files,
// which root alone reads. MaterialStore is the real one, MaterialFake
// (material_fake.go) keeps it in memory.
type Material interface {
	// Key is the placeholder key. Missing: with create it is made (and
	// its directory), without it is nil.
	Key(ctx context.Context, create bool) ([]byte, error)
	// Problems are what is missing or wrong, path -> why; none: all as
	// it should be, the bundle built from the system's roots as they are.
	Problems(ctx context.Context) (map[string]string, error)
	// Ensure makes or repairs what Problems finds. It never replaces a
	// valid key or CA: the placeholders and the agents' trust stay.
	Ensure(ctx context.Context) error
	// Secret is the content of a root's file flock-proxy is handed: a
	// secret's, or a model API's key or CA.
	Secret(ctx context.Context, path string) ([]byte, error)
	// HandOver writes values (credential name -> value) into flock-proxy's
	// hand-over directory (handover.go), each whole or not at all; a
	// missing directory (no proxy running to take them) is an error.
	HandOver(ctx context.Context, values map[string][]byte) error
	// Untaken are those of names the proxy has not taken (removed) yet.
	Untaken(ctx context.Context, names []string) ([]string, error)
	// Withdraw removes names from the directory: what was not taken.
	Withdraw(ctx context.Context, names []string) error
}

// SystemRoots is the system's trusted roots (Debian's ca-certificates),
// what the bundle starts with.
const SystemRoots = "/etc/ssl/certs/ca-certificates.crt"

// KeySize is the placeholder key's length in bytes.
const KeySize = 32

// MaterialStore is the real Material: the files at spec's paths.
type MaterialStore struct {
	Dir, CAPath, KeyPath, CertPath, BundlePath string
	Roots                                      string // the system's roots
	HandOverDir                                string // spec.ProxyHandOverPath
}

// NewMaterialStore is the host's material at spec's paths.
func NewMaterialStore() MaterialStore {
	return MaterialStore{Dir: spec.SecretsDir, CAPath: spec.SecretsCAPath, KeyPath: spec.PlaceholderKeyPath,
		CertPath: spec.SecretsCACertPath, BundlePath: spec.SecretsCABundlePath, Roots: SystemRoots,
		HandOverDir: spec.ProxyHandOverPath}
}

var _ Material = MaterialStore{}

func (m MaterialStore) Key(ctx context.Context, create bool) ([]byte, error) {
	key, _, err := readPrivate(m.KeyPath)
	switch {
	case err == nil && len(key) == KeySize:
		return key, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	case !create:
		return nil, nil
	}
	if err := m.ensureDir(); err != nil {
		return nil, err
	}
	key = make([]byte, KeySize)
	rand.Read(key) // crypto/rand does not fail
	if err := fsutil.WriteAtomic(m.KeyPath, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing the placeholder key: %w", err)
	}
	return key, nil
}

func (m MaterialStore) Problems(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	if fi, err := os.Lstat(m.Dir); err != nil {
		out[m.Dir] = "missing"
	} else if !fi.IsDir() || fi.Mode().Perm() != 0o700 || owner(fi) != 0 {
		out[m.Dir] = fmt.Sprintf("a %s of mode %o, owner uid %d; want root's directory, 0700", fsutil.TypeName(fi.Mode()), fi.Mode().Perm(), owner(fi))
	}
	if key, mode, err := readPrivate(m.KeyPath); err != nil || len(key) != KeySize || mode != 0o600 {
		out[m.KeyPath] = privateWhy(err, "32 bytes", len(key) == KeySize, mode)
	}
	ca, mode, err := m.loadCA()
	if err != nil || mode != 0o600 {
		out[m.CAPath] = privateWhy(err, "a CA's certificate and key", err == nil, mode)
		return out, nil // the certificate and the bundle are made from it
	}
	cert, bundle, err := m.public(ca)
	if err != nil {
		out[m.BundlePath] = err.Error()
		return out, nil
	}
	for path, want := range map[string][]byte{m.CertPath: cert, m.BundlePath: bundle} {
		fi, err := os.Lstat(path)
		have, rerr := os.ReadFile(path)
		switch {
		case err != nil || rerr != nil:
			out[path] = "missing"
		case !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644:
			out[path] = fmt.Sprintf("a %s of mode %o; want a file, 0644", fsutil.TypeName(fi.Mode()), fi.Mode().Perm())
		case !bytes.Equal(have, want):
			out[path] = "not the CA's certificate (after the system's roots)"
		}
	}
	return out, nil
}

func (m MaterialStore) Ensure(ctx context.Context) error {
	if _, err := m.Key(ctx, true); err != nil {
		return err
	}
	if err := os.Chmod(m.KeyPath, 0o600); err != nil {
		return fmt.Errorf("making the placeholder key root's: %w", err)
	}
	ca, _, err := m.loadCA()
	if err != nil {
		if ca, err = secrets.NewCA(); err != nil {
			return err
		}
		certPEM, keyPEM, err := ca.PEM()
		if err != nil {
			return err
		}
		if err := fsutil.WriteAtomic(m.CAPath, append(certPEM, keyPEM...), 0o600); err != nil {
			return fmt.Errorf("writing flock-proxy's CA: %w", err)
		}
	} else if err := os.Chmod(m.CAPath, 0o600); err != nil {
		return fmt.Errorf("making flock-proxy's CA root's: %w", err)
	}
	cert, bundle, err := m.public(ca)
	if err != nil {
		return err
	}
	for path, b := range map[string][]byte{m.CertPath: cert, m.BundlePath: bundle} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := fsutil.WriteAtomic(path, b, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

func (m MaterialStore) Secret(ctx context.Context, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the secret: %w", err)
	}
	return b, nil
}

// loadCA reads the CA (certificate and key in one PEM file) and its mode.
func (m MaterialStore) loadCA() (*secrets.CA, fs.FileMode, error) {
	b, mode, err := readPrivate(m.CAPath)
	if err != nil {
		return nil, 0, err
	}
	ca, err := secrets.LoadCA(b, b)
	return ca, mode, err
}

// public are the CA's certificate and the bundle: the system's roots,
// then the certificate.
func (m MaterialStore) public(ca *secrets.CA) (cert, bundle []byte, err error) {
	cert, _, err = ca.PEM()
	if err != nil {
		return nil, nil, err
	}
	roots, err := os.ReadFile(m.Roots)
	if err != nil {
		return nil, nil, fmt.Errorf("the system's roots: %w; install ca-certificates (agents granted secrets trust them and flock-proxy's CA)", err)
	}
	if len(roots) > 0 && roots[len(roots)-1] != '\n' {
		roots = append(roots, '\n')
	}
	return cert, append(roots, cert...), nil
}

func (m MaterialStore) ensureDir() error {
	if err := os.MkdirAll(filepath.Dir(m.Dir), 0o755); err != nil {
		return fmt.Errorf("creating the parent of %s: %w", m.Dir, err)
	}
	if err := os.Mkdir(m.Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating %s: %w", m.Dir, err)
	}
	fi, err := os.Lstat(m.Dir)
	if err != nil {
		return fmt.Errorf("creating %s: %w", m.Dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is a %s, not a directory; remove it and provision again", m.Dir, fsutil.TypeName(fi.Mode()))
	}
	if err := os.Chmod(m.Dir, 0o700); err != nil {
		return fmt.Errorf("making %s root's (0700): %w", m.Dir, err)
	}
	return nil
}

// readPrivate reads a root-only file without following a symlink (one in
// its place would hand the key elsewhere), with its mode.
func readPrivate(path string) ([]byte, fs.FileMode, error) {
	b, fi, err := fsutil.ReadRegular(path, 1<<20)
	if err != nil {
		return nil, 0, err
	}
	return b, fi.Mode().Perm(), nil
}

// privateWhy says what is wrong with a root-only file.
func privateWhy(err error, what string, good bool, mode fs.FileMode) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	case err != nil:
		return err.Error()
	case !good:
		return "not " + what
	}
	return fmt.Sprintf("mode %o, want 0600", mode)
}

func owner(fi fs.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }
