package explain

import (
	"strings"
	"testing"
)

func TestParseExposure(t *testing.T) {
	for _, tc := range []struct {
		out         string
		score       float64
		rating, why string
	}{
		{"  ✓ PrivateTmp=  ...\n\n→ Overall exposure level for flock-agent@1.service: 1.3 OK 🙂\n", 1.3, "OK", ""},
		{"→ Overall exposure level for flock-agent@3.service: 6.5 MEDIUM 😐", 6.5, "MEDIUM", ""},
		{"→ Overall exposure level for x.service: 10 UNSAFE 😨", 10, "UNSAFE", ""},
		{"Unit flock-agent@9.service not found.", 0, "", "printed no overall exposure level"},
	} {
		e := ParseExposure(tc.out)
		switch {
		case tc.why != "" && (e.Score != nil || !strings.Contains(e.Unavailable, tc.why)):
			t.Errorf("%q: %+v, want unavailable: %s", tc.out, e, tc.why)
		case tc.why == "" && (e.Score == nil || *e.Score != tc.score || e.Rating != tc.rating):
			t.Errorf("%q: %+v, want %.1f %s", tc.out, e, tc.score, tc.rating)
		}
	}
}

func TestKernelFacts(t *testing.T) {
	for _, tc := range []struct {
		abi    int
		scopes bool
		note   string
	}{
		{0, false, "no Landlock"},
		{3, false, "abstract UNIX sockets are not scoped"},
		{5, false, "scopes need 6"},
		{6, true, "scoped to the agent"},
		{7, true, "scoped to the agent"},
	} {
		k := KernelFacts("6.x", tc.abi)
		if k.IPCScopes != tc.scopes || k.LandlockABI != tc.abi || !strings.Contains(k.Note, tc.note) {
			t.Errorf("ABI %d: %+v, want scopes %v and a note saying %q", tc.abi, k, tc.scopes, tc.note)
		}
	}
}

// Without systemd-analyze the report says so; explain does not fail.
func TestExposureUnavailable(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	e := SystemdExposure(t.Context(), "flock-agent@1.service")
	if e.Score != nil || !strings.Contains(e.Unavailable, "systemd-analyze security flock-agent@1.service") {
		t.Errorf("no systemd-analyze: %+v", e)
	}
}
