package explain

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/agent"
)

// HostKernel reads this kernel's release and Landlock ABI.
func HostKernel() Kernel {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return KernelFacts(unix.ByteSliceToString(u.Release[:]), agent.LandlockABI())
}

// KernelFacts says what a kernel with this Landlock ABI does for the walls.
func KernelFacts(release string, abi int) Kernel {
	k := Kernel{Release: release, LandlockABI: abi, IPCScopes: abi >= agent.ScopeABI}
	switch {
	case k.IPCScopes:
		k.Note = fmt.Sprintf("Landlock ABI %d: abstract UNIX sockets and signals are scoped to the agent", abi)
	case abi > 0:
		k.Note = fmt.Sprintf("Landlock ABI %d, scopes need %d (Linux 6.12): abstract UNIX sockets are not scoped, an agent at level process can reach another's", abi, agent.ScopeABI)
	default:
		k.Note = "no Landlock: abstract UNIX sockets are not scoped, an agent at level process can reach another's"
	}
	return k
}

// SystemdExposure runs `systemd-analyze security` on unit; where it
// cannot, Unavailable says why.
func SystemdExposure(ctx context.Context, unit string) Exposure {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemd-analyze", "security", "--no-pager", unit)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return Exposure{Unavailable: fmt.Sprintf("systemd-analyze security %s: %v: %s", unit, err, strings.TrimSpace(errOut.String()))}
	}
	return ParseExposure(out.String())
}

var exposureRe = regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+(?:\.[0-9]+)?) (\S+)`)

// ParseExposure reads the overall exposure line of systemd-analyze
// security's output.
func ParseExposure(out string) Exposure {
	m := exposureRe.FindStringSubmatch(out)
	if m == nil {
		return Exposure{Unavailable: "systemd-analyze security printed no overall exposure level"}
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return Exposure{Unavailable: "systemd-analyze security: exposure " + m[1] + ": " + err.Error()}
	}
	return Exposure{Score: &f, Rating: m[2]}
}
