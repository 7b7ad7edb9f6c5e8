package units

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestUsageOf reads systemd's Service properties as D-Bus decodes them:
// "[not set]" (the maximum uint64) and an absent property are no figure,
// not a zero.
//
// Tier: unit (no root).
func TestUsageOf(t *testing.T) {
	n := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name  string
		props map[string]any
		want  Usage
	}{
		{"accounting on", map[string]any{"NRestarts": uint32(3), "ExecMainCode": int32(2), "ExecMainStatus": int32(9),
			"MemoryCurrent": uint64(4096), "MemoryPeak": uint64(8192), "CPUUsageNSec": uint64(1e9)},
			Usage{Restarts: 3, LastExit: Exit{Code: "killed", Status: 9}, MemoryBytes: n(4096), MemoryPeak: n(8192), CPUNSec: n(1e9)}},
		{"not set (an nspawn machine without delegated controllers)", map[string]any{"ExecMainCode": int32(1), "ExecMainStatus": int32(1),
			"MemoryCurrent": uint64(math.MaxUint64), "CPUUsageNSec": uint64(math.MaxUint64)},
			Usage{LastExit: Exit{Code: "exited", Status: 1}}},
		{"never ended, systemd 252 (no MemoryPeak)", map[string]any{"NRestarts": uint32(0), "ExecMainCode": int32(0), "MemoryCurrent": uint64(0)},
			Usage{MemoryBytes: n(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := usageOf(tc.props)
			if got.Restarts != tc.want.Restarts || got.LastExit != tc.want.LastExit ||
				!samePtr(got.MemoryBytes, tc.want.MemoryBytes) || !samePtr(got.MemoryPeak, tc.want.MemoryPeak) || !samePtr(got.CPUNSec, tc.want.CPUNSec) {
				t.Errorf("usageOf = %s, want %s", show(got), show(tc.want))
			}
		})
	}
}

func samePtr(a, b *uint64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(u Usage) string {
	p := func(v *uint64) any {
		if v == nil {
			return "nil"
		}
		return *v
	}
	return fmt.Sprint(u.Restarts, u.LastExit, p(u.MemoryBytes), p(u.MemoryPeak), p(u.CPUNSec))
}

// TestCgroupPeak reads memory.peak where systemd (before 255) has no
// MemoryPeak, and nothing for a cgroup without the file or a path that
// leaves the hierarchy.
//
// Tier: unit (no root).
func TestCgroupPeak(t *testing.T) {
	cgroupRoot = t.TempDir()
	t.Cleanup(func() { cgroupRoot = "/sys/fs/cgroup" })
	unit := filepath.Join(cgroupRoot, "system.slice", "flock-agent@1.service")
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unit, "memory.peak"), []byte("67108864\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	for cg, want := range map[any]*uint64{
		"/system.slice/flock-agent@1.service": func() *uint64 { v := uint64(64 << 20); return &v }(),
		"/system.slice/flock-agent@2.service": nil,
		"/system.slice/../../etc":             nil,
		"":                                    nil,
		nil:                                   nil,
	} {
		if got := cgroupPeak(cg); !samePtr(got, want) {
			t.Errorf("cgroupPeak(%v) = %v, want %v", cg, got, want)
		}
	}
}
