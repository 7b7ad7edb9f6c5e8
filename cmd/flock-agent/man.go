package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/internal/version"
)

// The man page, flock-agent(1), is made from the tables below by
// `flock-agent --man` (make deb runs it), like flockctl's from its
// commands: TestManModes checks that parseArgs reads every command line
// of modes as the mode it is listed under, and TestManEnvironment that
// environment lists every variable of agent.Env.

// modes are the command lines an operator meets, each with its mode (the
// audit's probe mode and the launcher's sandbox mode are flock's own).
var modes = []struct {
	mode mode
	args []string
	what string
}{
	{modeDefault, nil, "Connect to the bus as the agent, send a heartbeat every $FLOCK_HEARTBEAT and log; run no tasks. For an agent whose own program is another process, or none."},
	{modeTask, []string{"task", "--", "COMMAND", "ARGS..."}, "The same, and run COMMAND ARGS for each task the bus hands this worker: the task's payload on its standard input, its exit status and output (standard output and error) the result. A command that runs longer than $FLOCK_TASK_TIMEOUT or writes more than $FLOCK_MAX_OUTPUT bytes is stopped and its task failed; a task in hand when flock-agent is stopped goes back to the queue."},
	{modeExec, []string{"exec", "--", "COMMAND", "ARGS..."}, "Become COMMAND ARGS, the agent's own program, which speaks to the bus itself ($NATS_URL and $NATS_NKEY are all a NATS client needs). A bare -- COMMAND ARGS is the same."},
	{modeVersion, []string{"--version"}, "Print the build: version, commit and date."},
}

// environment is what the agent's unit hands flock-agent (agent.Env).
var environment = []struct{ name, what string }{
	{"AGENT_ID", "The agent's id, a positive number. Without it flock-agent refuses to run: it runs inside a flock-agent@ID.service unit, which flockctl provision starts."},
	{"AGENT_ROLE", "orchestrator, worker or monitor."},
	{"NATS_URL", "The bus (flock.service) to connect to."},
	{"NATS_NKEY", "The file that holds the agent's bus identity (an nkey seed), bound read-only into its unit; if unset, $CREDENTIALS_DIRECTORY/nats."},
	{"CREDENTIALS_DIRECTORY", "Where systemd puts a unit's credentials (LoadCredential=), for NATS_NKEY's default."},
	{"NATS_INBOX_PREFIX", "The only inbox prefix the bus lets this agent receive answers on, for the NATS clients it brings (flock-agent's own sets the same)."},
	{"SHARED_DIR", "The flock's shared directory."},
	{"HOME", "The agent's own directory, where task commands run."},
	{"FLOCK_LOG_FILE", "A file to log to as well as standard output (the journal); unset: standard output only."},
	{"FLOCK_HEARTBEAT", "How often to send a heartbeat, a Go duration; default " + agent.DefaultHeartbeat.String() + "."},
	{"FLOCK_TASK_TIMEOUT", "How long a task's command may run, a Go duration; default " + agent.DefaultTaskTimeout.String() + "."},
	{"FLOCK_MAX_OUTPUT", fmt.Sprintf("Bytes of a task command's output kept as its result; default %d.", agent.DefaultMaxOutput)},
	{"FLOCK_JIT", "true lets the agent map memory both writable and executable, as a JIT (Node, a JVM) needs; default false, which refuses it."},
	{"FLOCK_ENV", "The names of the spec's variables among these, which a launcher hands on to a container."},
}

// writeMan writes flock-agent(1) in roff, dated by the build (the
// commit's time), so the same commit makes the same page.
func writeMan(w io.Writer, build version.Info) error {
	var b strings.Builder
	month := ""
	if t, err := time.Parse(time.RFC3339, build.Date); err == nil {
		month = t.UTC().Format("Jan 2006")
	}
	fmt.Fprintf(&b, ".TH \"FLOCK-AGENT\" \"1\" %q \"flock %s\" \"flock manual\"\n", month, roff(build.Version))
	b.WriteString(".SH NAME\nflock-agent \\- run one agent of a flock inside its systemd unit\n")
	b.WriteString(".SH SYNOPSIS\n")
	for i, m := range modes {
		if i > 0 {
			b.WriteString(".br\n")
		}
		fmt.Fprintf(&b, "%s\n", commandLine(m.args))
	}
	b.WriteString(`.SH DESCRIPTION
flock-agent is the program every agent's unit runs (flock-agent@ID.service,
which flockctl provision makes).
It first applies the walls systemd cannot: a Landlock scope that keeps the
agent's abstract UNIX sockets and signals to itself, and a seccomp filter
that holds at every isolation level.
Then, by its arguments, it connects to the bus as the agent, or runs a
command for each task, or becomes the agent's own program.
An operator does not run it by hand; flockctl status, logs and events say
what it did.
.SH MODES
`)
	for _, m := range modes {
		b.WriteString(".TP\n")
		b.WriteString(commandLine(m.args) + "\n")
		b.WriteString(roff(m.what) + "\n")
	}
	b.WriteString(".SH ENVIRONMENT\nThe agent's unit sets these; its spec's env adds its own.\n")
	for _, e := range environment {
		fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", e.name, roff(e.what))
	}
	b.WriteString(`.SH EXIT STATUS
0 when stopped (SIGTERM); 1 when it cannot start (the message says why).
In exec mode the status is the agent's program's own.
.SH SEE ALSO
.BR flockctl (1),
.BR flockctl-provision (1),
.BR flockctl-logs (1),
.BR systemd.exec (5)
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// roff escapes text for a roff line: a backslash, the dashes that start
// an option (minus signs, not hyphens: --version, --), and a leading
// period or quote (a request).
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = optionDashes.ReplaceAllStringFunc(s, func(d string) string { return strings.ReplaceAll(d, "-", `\-`) })
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

var optionDashes = regexp.MustCompile(`(^|\s)-+`)

// commandLine is flock-agent with args in roff: the program and literal
// words bold, placeholders (COMMAND, ARGS...) italic.
func commandLine(args []string) string {
	words := []string{`\fBflock-agent\fR`}
	for _, a := range args {
		font := `\fB`
		if strings.ContainsAny(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			font = `\fI`
		}
		words = append(words, font+roff(a)+`\fR`)
	}
	return strings.Join(words, " ")
}
