package version

// Tier: unit.

import (
	"encoding/json"
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8"}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name              string
		ver, commit, date string
		bi                *debug.BuildInfo
		want              string
	}{
		{"stamped by the Makefile", "0.0.0~git20261127074000.60ca03a", "60ca03a5d1e2", "2026-11-27T07:40:00Z",
			vcs("vcs.revision", "ffff", "vcs.time", "2020-01-01T00:00:00Z"),
			"flockctl 0.0.0~git20261127074000.60ca03a (commit 60ca03a5d1e2, built 2026-11-27T07:40:00Z, go1.26.8)"},
		{"go build in a clean checkout", "", "", "",
			vcs("vcs.revision", "60ca03a5d1e2", "vcs.time", "2026-11-27T07:40:00Z", "vcs.modified", "false"),
			"flockctl devel (commit 60ca03a5d1e2, built 2026-11-27T07:40:00Z, go1.26.8)"},
		{"go build in a changed checkout", "", "", "",
			vcs("vcs.revision", "60ca03a5d1e2", "vcs.time", "2026-11-27T07:40:00Z", "vcs.modified", "true"),
			"flockctl devel (commit 60ca03a5d1e2-dirty, built 2026-11-27T07:40:00Z, go1.26.8)"},
		{"go build -buildvcs=false", "", "", "", vcs(),
			"flockctl devel (commit unknown, built unknown, go1.26.8)"},
		{"only a version stamped", "1.2.3", "", "", vcs("vcs.revision", "abc"),
			"flockctl 1.2.3 (commit abc, built unknown, go1.26.8)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := resolve("flockctl", tc.ver, tc.commit, tc.date, tc.bi)
			if got := in.String(); got != tc.want {
				t.Errorf("String() = %q\nwant       %q", got, tc.want)
			}
			// --output json is read back by scripts and tests: it must
			// decode to the same Info.
			var back Info
			if err := json.Unmarshal(in.JSON(), &back); err != nil || back != in {
				t.Errorf("JSON round trip: %+v, %v; want %+v", back, err, in)
			}
		})
	}
}

func TestGetWithoutBuildInfo(t *testing.T) {
	in := resolve("flock-agent", "", "", "", nil)
	if in.Version != "devel" || in.Commit != unknown || in.Date != unknown || in.Go == "" {
		t.Errorf("no stamp and no build info: %+v", in)
	}
}
