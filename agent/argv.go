package agent

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// argsFlag carries flock-agent's whole argument list, encoded, as the one
// argument of a unit's command.
const argsFlag = "--args="

// UnitArgs is how a unit's ExecStart carries flock-agent's arguments
// (docs/design.md, "The agent's command"). systemd 252 writes "$" as "\$"
// and ";" as "\;" into a transient unit's file and, after a daemon-reload
// (any package install does one), reads such a word back verbatim, so the
// agent would get its arguments changed. An argument list with either goes
// as one --args= argument, base64url of its JSON, which systemd neither
// expands nor escapes; any other goes as written, readable in
// `systemctl status`. ParseUnitArgs is its inverse.
func UnitArgs(args []string) []string {
	encode := len(args) == 1 && strings.HasPrefix(args[0], argsFlag)
	for _, a := range args {
		encode = encode || strings.ContainsAny(a, "$;")
	}
	if !encode {
		return args
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(err) // a []string always marshals
	}
	return []string{argsFlag + base64.RawURLEncoding.EncodeToString(b)}
}

// ParseUnitArgs returns the arguments UnitArgs encoded.
func ParseUnitArgs(args []string) ([]string, error) {
	if len(args) != 1 || !strings.HasPrefix(args[0], argsFlag) {
		return args, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(args[0], argsFlag))
	var out []string
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w (the unit's command is damaged; flockctl provision rewrites it)", argsFlag, err)
	}
	return out, nil
}
