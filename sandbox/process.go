package sandbox

import "errors"

// process is level process: the agent is the unit's main process, as its
// own uid, under the unit's whole hardening; no runtime, no root of its
// own. The default, and the weakest level: "process isolation with
// guardrails".
type process struct{}

func init() { Register(process{}) }

func (process) Level() Level { return Process }

func (process) Profile() Profile {
	return Profile{Rank: 0, Label: "process isolation with guardrails", Walls: ProcessWalls}
}

func (process) CheckRoot(rootfs, image string) (string, string) {
	switch {
	case rootfs != "":
		return "rootfs", "is for level " + Or(Contained()) + "; a process agent runs on the host's file system: remove rootfs or set level: podman"
	case image != "":
		return "image", "is for level podman; a process agent runs on the host's file system: remove image or set level: podman"
	}
	return "", ""
}

func (process) Launch(Config, string, string) error {
	return errors.New("sandbox: level process has no launcher: its unit runs the agent itself")
}

func (process) Gaps(h Host) []Gap { return hostNetGaps(h) }
