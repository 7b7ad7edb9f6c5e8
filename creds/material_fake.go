package creds

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"sync"

	"github.com/flockrun/flock/spec"
)

// MaterialFake is an in-memory Material for planner tests: its key, and
// which of the material's files are as they should be; Secrets are the
// secret files' contents by path.
type MaterialFake struct {
	mu      sync.Mutex
	key     []byte
	good    map[string]bool
	Secrets map[string][]byte
	// Ensured counts Ensure's calls.
	Ensured int
	// HandedOver are the values handed to the proxy and not taken yet,
	// Taken those it took, by credential name. The proxy takes all of
	// them when asked what is untaken, unless Refuses; NoHandOverDir: it
	// has no hand-over directory (it is not running).
	HandedOver, Taken      map[string][]byte
	Refuses, NoHandOverDir bool
}

var _ Material = (*MaterialFake)(nil)

// NewMaterialFake is a host without the material, whose secret files are
// secrets (path -> content).
func NewMaterialFake(secrets map[string][]byte) *MaterialFake {
	return &MaterialFake{good: map[string]bool{}, Secrets: secrets}
}

// materialPaths are the fake's files, each Problems names.
var materialPaths = []string{spec.SecretsDir, spec.PlaceholderKeyPath, spec.SecretsCAPath, spec.SecretsCACertPath, spec.SecretsCABundlePath}

func (f *MaterialFake) Key(ctx context.Context, create bool) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.key == nil && create {
		f.key = make([]byte, KeySize)
		rand.Read(f.key)
		f.good[spec.SecretsDir], f.good[spec.PlaceholderKeyPath] = true, true
	}
	return bytes.Clone(f.key), nil
}

func (f *MaterialFake) Problems(ctx context.Context) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for _, p := range materialPaths {
		if !f.good[p] {
			out[p] = "missing"
		}
	}
	return out, nil
}

func (f *MaterialFake) Ensure(ctx context.Context) error {
	if _, err := f.Key(ctx, true); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range materialPaths {
		f.good[p] = true
	}
	f.Ensured++
	return nil
}

func (f *MaterialFake) Secret(ctx context.Context, path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.Secrets[path]
	if !ok {
		return nil, fmt.Errorf("reading the secret: open %s: no such file", path)
	}
	return bytes.Clone(b), nil
}

// Break marks path as deleted by hand (one of the material's); the key's
// loses the key.
func (f *MaterialFake) Break(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.good, path)
	if path == spec.PlaceholderKeyPath {
		f.key = nil
	}
}

// Files are the paths the fake has as they should be.
func (f *MaterialFake) Files() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.good)
}

func (f *MaterialFake) HandOver(ctx context.Context, values map[string][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.NoHandOverDir {
		return fmt.Errorf("the proxy's hand-over directory: stat %s: no such file or directory", spec.ProxyHandOverPath)
	}
	if f.HandedOver == nil {
		f.HandedOver = map[string][]byte{}
	}
	for name, v := range values {
		f.HandedOver[name] = bytes.Clone(v)
	}
	return nil
}

func (f *MaterialFake) Untaken(ctx context.Context, names []string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var left []string
	for _, name := range names {
		v, ok := f.HandedOver[name]
		switch {
		case ok && f.Refuses:
			left = append(left, name)
		case ok:
			if f.Taken == nil {
				f.Taken = map[string][]byte{}
			}
			f.Taken[name] = v
			delete(f.HandedOver, name)
		}
	}
	return left, nil
}

func (f *MaterialFake) Withdraw(ctx context.Context, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, name := range names {
		delete(f.HandedOver, name)
	}
	return nil
}
