package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// setAgentEnv sets the variables a unit sets, overridable by extra
// ("NAME", "value" pairs), so the host's own environment never leaks in.
func setAgentEnv(t *testing.T, extra ...string) {
	t.Helper()
	vars := map[string]string{
		"AGENT_ID": "3", "AGENT_ROLE": "worker", "NATS_URL": "nats://127.0.0.1:4222",
		"NATS_NKEY": "/run/credentials/flock-agent@3.service/nats", "CREDENTIALS_DIRECTORY": "",
		"NATS_INBOX_PREFIX": "_INBOX.flock-3", "SHARED_DIR": "/srv/flock/common",
		"FLOCK_LOG_FILE": "/srv/flock/logs/3.log", "HOME": "/srv/flock/agents/3",
		"FLOCK_HEARTBEAT": "", "FLOCK_TASK_TIMEOUT": "", "FLOCK_MAX_OUTPUT": "", "FLOCK_JIT": "",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		vars[extra[i]] = extra[i+1]
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

// Tier: unit (no root).
func TestFromEnv(t *testing.T) {
	want := Env{
		ID: 3, Role: "worker", NATSURL: "nats://127.0.0.1:4222",
		NKeyFile: "/run/credentials/flock-agent@3.service/nats", InboxPrefix: "_INBOX.flock-3",
		SharedDir: "/srv/flock/common", LogFile: "/srv/flock/logs/3.log", Home: "/srv/flock/agents/3",
		Heartbeat: DefaultHeartbeat, TaskTimeout: DefaultTaskTimeout, MaxOutput: DefaultMaxOutput,
	}
	for _, tc := range []struct {
		id      string
		wantErr string
	}{
		{"", "AGENT_ID is not set"},
		{"x", `AGENT_ID="x" is not a positive number`},
		{"0", `AGENT_ID="0" is not a positive number`},
		{"3", ""},
	} {
		setAgentEnv(t, "AGENT_ID", tc.id)
		e, err := FromEnv()
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("AGENT_ID=%q: err %v, want %q", tc.id, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !reflect.DeepEqual(e, want)):
			t.Errorf("AGENT_ID=%q: %+v, %v", tc.id, e, err)
		}
	}
	t.Setenv("AGENT_ID", "")
	if _, err := FromEnv(); !errors.Is(err, ErrNotAnAgent) {
		t.Errorf("unset AGENT_ID: %v, want ErrNotAnAgent", err)
	}
}

// Every line goes to the journal (stdout) and the log file, as JSON with
// the time and the agent's id. Tier: unit (no root).
func TestLoggerWritesJSONToBoth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "3.log")
	var stdout bytes.Buffer
	log, closeLog, err := NewLogger(Env{ID: 3, LogFile: file}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("agent started", "pid", 42)
	if err := closeLog(); err != nil {
		t.Fatal(err)
	}
	fromFile, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromFile, stdout.Bytes()) {
		t.Errorf("file %q and stdout %q differ", fromFile, stdout.Bytes())
	}
	var line struct {
		Time  time.Time `json:"time"`
		Msg   string    `json:"msg"`
		Agent int       `json:"agent"`
		PID   int       `json:"pid"`
	}
	if err := json.Unmarshal(fromFile, &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", fromFile, err)
	}
	if line.Agent != 3 || line.Msg != "agent started" || line.PID != 42 || time.Since(line.Time) > time.Minute {
		t.Errorf("line %+v", line)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("log file mode %s, want 0600", fi.Mode())
	}
}
