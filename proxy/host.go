package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/google/renameio/v2"

	"github.com/flockrun/flock/internal/fsutil"
)

// Host is the proxy's config file as the planner sees it; the proxy's
// unit is units.ProxyUnit, managed like the bus's.
type Host interface {
	// Config is the installed file's bytes; nil if there is none.
	Config(ctx context.Context) ([]byte, error)
	WriteConfig(ctx context.Context, b []byte) error
	RemoveConfig(ctx context.Context) error
}

// System is the real Host: the file at Path.
type System struct{ Path string }

// NewSystem is the host's proxy config at ConfigPath.
func NewSystem() *System { return &System{Path: ConfigPath} }

func (s *System) Config(ctx context.Context) ([]byte, error) {
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.Path, err)
	}
	return b, nil
}

// WriteConfig replaces the file atomically (world-readable: uids and
// rules, the proxy's dynamic user reads it).
func (s *System) WriteConfig(ctx context.Context, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", s.Path, err)
	}
	if err := renameio.WriteFile(s.Path, b, 0o644, renameio.WithStaticPermissions(0o644)); err != nil {
		return fmt.Errorf("writing %s: %w", s.Path, err)
	}
	return nil
}

func (s *System) RemoveConfig(ctx context.Context) error {
	return fsutil.RemoveWithDir(s.Path)
}

// Fake keeps the config in memory for planner tests.
type Fake struct {
	mu   sync.Mutex
	File []byte
}

func (f *Fake) Config(ctx context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bytes.Clone(f.File), nil
}

func (f *Fake) WriteConfig(ctx context.Context, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.File = bytes.Clone(b)
	return nil
}

func (f *Fake) RemoveConfig(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.File = nil
	return nil
}
