package units

import (
	"context"
	"fmt"
	"maps"
)

// Properties reads the named unit's properties as systemd has them now
// (its Unit and Service interfaces, as `systemctl show` prints them), each
// value as D-Bus decodes it. A unit that is not loaded is not read: asking
// systemd for it would load it (a collected transient unit comes back).
func (s *Systemd) Properties(ctx context.Context, name string) (map[string]any, error) {
	// By pattern, which lists loaded units and loads nothing.
	us, err := s.conn.ListUnitsByPatternsContext(ctx, nil, []string{name})
	if err != nil {
		return nil, fmt.Errorf("ListUnitsByPatterns %s: %w", name, err)
	}
	if len(us) == 0 || us[0].LoadState != "loaded" {
		return nil, fmt.Errorf("%s: %w", name, ErrNotLoaded)
	}
	props, err := s.conn.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("GetUnitProperties %s: %w", name, err)
	}
	svc, err := s.conn.GetUnitTypePropertiesContext(ctx, name, "Service")
	if err != nil {
		return nil, fmt.Errorf("GetUnitTypeProperties %s Service: %w", name, err)
	}
	maps.Copy(props, svc)
	return props, nil
}

// ActiveState reads the named unit's state as systemd has it now. Like
// Properties it lists by pattern, which loads nothing; a unit listed but
// not found (its file removed while it was loaded) is not there either.
// A unit systemd has not loaded (never started, or collected since it
// stopped) is inactive if it has a file, else not there.
func (s *Systemd) ActiveState(ctx context.Context, name string) (string, error) {
	us, err := s.conn.ListUnitsByPatternsContext(ctx, nil, []string{name})
	if err != nil {
		return "", fmt.Errorf("ListUnitsByPatterns %s: %w", name, err)
	}
	if len(us) > 0 && us[0].LoadState != "not-found" {
		return us[0].ActiveState, nil
	}
	files, err := s.conn.ListUnitFilesByPatternsContext(ctx, nil, []string{name})
	if err != nil {
		return "", fmt.Errorf("ListUnitFilesByPatterns %s: %w", name, err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("%s: %w", name, ErrNotLoaded)
	}
	return "inactive", nil
}
