package units

import (
	"fmt"
	"strconv"
	"strings"
)

// Render writes u as unit-file-like lines, the way `systemctl show` and a
// unit file would say them: for `flockctl explain`, golden files and the
// hash.
func Render(u Unit) string {
	return "# " + u.Name + "\nDescription=" + u.Description + "\n" + renderProps(u.Properties)
}

func renderProps(props []Property) string {
	var b strings.Builder
	for _, p := range props {
		fmt.Fprintf(&b, "%s=%s\n", p.Name, renderValue(p.Value))
	}
	return b.String()
}

func renderValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case FileMode:
		return fmt.Sprintf("%04o", uint32(v))
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case []string:
		return strings.Join(v, " ")
	case []ExecCommand:
		var parts []string
		for _, c := range v {
			parts = append(parts, fmt.Sprintf("{path=%s argv=%s ignore_failure=%v}", c.Path, quoteAll(c.Argv), c.IgnoreFailure))
		}
		return strings.Join(parts, " ")
	case []TmpFS:
		var parts []string
		for _, t := range v {
			parts = append(parts, strings.TrimSuffix(t.Path+":"+t.Options, ":"))
		}
		return strings.Join(parts, " ")
	case []BindPath:
		var parts []string
		for _, bp := range v {
			s := bp.Source
			if bp.IgnoreMissing {
				s = "-" + s
			}
			parts = append(parts, s+":"+bp.Destination)
		}
		return strings.Join(parts, " ")
	case ExitStatusSet:
		var parts []string
		for _, n := range v.Statuses {
			parts = append(parts, strconv.Itoa(int(n)))
		}
		for _, n := range v.Signals {
			parts = append(parts, signalName(int(n)))
		}
		return strings.Join(parts, " ")
	case NameList:
		s := strings.Join(v.Names, " ")
		if !v.Allow {
			s = "~" + s
		}
		return s
	}
	return fmt.Sprintf("%#v", v)
}

// quoteAll quotes each argument, so arguments with spaces stay visible.
func quoteAll(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// ValueText is a property's value as Render prints it.
func ValueText(v any) string { return renderValue(v) }
