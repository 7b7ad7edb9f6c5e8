package sandbox

// Host is what of the host decides which walls a level can close there.
type Host struct {
	// IPCScopes: the kernel has Landlock IPC scopes (ABI 6, Linux 6.12+),
	// which keep an agent's abstract UNIX sockets to itself.
	IPCScopes bool
}

// Gap is a wall a level cannot close on a host, and why; flockctl explain
// prints each for the agents at that level.
type Gap struct {
	Wall string `json:"wall"`
	Why  string `json:"why"`
}

// abstractSocketsShared is the gap of a level whose agents use the host's
// network namespace on a kernel without Landlock scopes: abstract UNIX
// socket names live in the network namespace, where no mount, user or
// file permission reaches.
var abstractSocketsShared = Gap{
	Wall: "abstract UNIX sockets",
	Why: "the agent shares the host's network namespace, where abstract socket names live, and this kernel has no " +
		"Landlock IPC scope (Linux 6.12+) to confine them: it can connect to an abstract socket of any process on " +
		"the host, other agents' included, and they to its; level gvisor closes it (its kernel keeps UNIX sockets inside the sandbox)",
}

// hostNetGaps are the gaps of a level on the host's network namespace.
func hostNetGaps(h Host) []Gap {
	if h.IPCScopes {
		return nil
	}
	return []Gap{abstractSocketsShared}
}
