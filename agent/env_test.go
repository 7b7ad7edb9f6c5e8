package agent

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The variables beyond the id: defaults, the credential's fallback to
// $CREDENTIALS_DIRECTORY, and errors that name the variable.
// Tier: unit (no root).
func TestFromEnvVariables(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     []string
		check   func(Env) bool
		wantErr string
	}{
		{"defaults", nil, func(e Env) bool {
			return e.Heartbeat == 30*time.Second && e.TaskTimeout == 5*time.Minute && e.MaxOutput == 262144
		}, ""},
		{"set", []string{"FLOCK_HEARTBEAT", "2s", "FLOCK_TASK_TIMEOUT", "1m30s", "FLOCK_MAX_OUTPUT", "1000"}, func(e Env) bool {
			return e.Heartbeat == 2*time.Second && e.TaskTimeout == 90*time.Second && e.MaxOutput == 1000
		}, ""},
		{"credential from LoadCredential", []string{"NATS_NKEY", "", "CREDENTIALS_DIRECTORY", "/run/credentials/flock-agent@3.service"}, func(e Env) bool {
			return e.NKeyFile == "/run/credentials/flock-agent@3.service/nats"
		}, ""},
		{"NATS_NKEY wins", []string{"NATS_NKEY", "/elsewhere/seed", "CREDENTIALS_DIRECTORY", "/run/credentials/x"}, func(e Env) bool {
			return e.NKeyFile == "/elsewhere/seed"
		}, ""},
		{"no credential", []string{"NATS_NKEY", ""}, func(e Env) bool { return e.NKeyFile == "" }, ""},
		{"no role", []string{"AGENT_ROLE", ""}, func(e Env) bool { return e.Role == "" }, ""},
		{"bad heartbeat", []string{"FLOCK_HEARTBEAT", "30"}, nil, `FLOCK_HEARTBEAT="30" is not a duration`},
		{"zero heartbeat", []string{"FLOCK_HEARTBEAT", "0s"}, nil, `FLOCK_HEARTBEAT="0s" must be positive`},
		{"bad timeout", []string{"FLOCK_TASK_TIMEOUT", "soon"}, nil, `FLOCK_TASK_TIMEOUT="soon"`},
		{"bad max output", []string{"FLOCK_MAX_OUTPUT", "1k"}, nil, `FLOCK_MAX_OUTPUT="1k" is not a positive number of bytes`},
		{"negative max output", []string{"FLOCK_MAX_OUTPUT", "-1"}, nil, `FLOCK_MAX_OUTPUT="-1"`},
		{"bad role", []string{"AGENT_ROLE", "boss"}, nil, `AGENT_ROLE="boss"`},
		{"jit", []string{"FLOCK_JIT", "true"}, func(e Env) bool { return e.JIT }, ""},
		{"no jit", []string{"FLOCK_JIT", "false"}, func(e Env) bool { return !e.JIT }, ""},
		{"bad jit", []string{"FLOCK_JIT", "yes"}, nil, `FLOCK_JIT="yes": want true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setAgentEnv(t, tc.set...)
			e, err := FromEnv()
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("err %v", err)
			case !tc.check(e):
				t.Errorf("got %+v", e)
			}
		})
	}
}

// Tier: unit. What units and the container launcher write with Environ is
// what every flock-agent mode reads with FromEnv: one list, both ways.
func TestEnvironRoundTrip(t *testing.T) {
	want := Env{ID: 7, Role: "worker", NATSURL: "nats://127.0.0.1:4222", NKeyFile: "/run/credentials/flock-agent@7.service/nats",
		InboxPrefix: "_INBOX.flock-7", SharedDir: "/srv/flock/common", LogFile: "/srv/flock/logs/7.log", Home: "/srv/flock/agents/7",
		Heartbeat: 2 * time.Second, TaskTimeout: 90 * time.Minute, MaxOutput: 1 << 20, JIT: true,
		Extra: []string{"LOG_LEVEL=debug", "NODE_EXTRA_CA_CERTS=/etc/ssl/x.pem", "EMPTY=", "HTTPS_PROXY=http://127.0.0.1:4230", "https_proxy=http://127.0.0.1:4230"}}
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	seen := map[string]bool{}
	for _, kv := range want.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			t.Fatalf("Environ: %q malformed or repeated", kv)
		}
		seen[k] = true
		t.Setenv(k, v)
	}
	got, err := FromEnv()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("FromEnv(Environ()) = %+v, %v\nwant %+v", got, err, want)
	}
	// A unit's Environment=, read back (units.KilledBy reads FLOCK_JIT so).
	if got, err := EnvOf(want.Environ()); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("EnvOf(Environ()) = %+v, %v\nwant %+v", got, err, want)
	}
	// Without extras, no FLOCK_ENV: a unit of flock's own has nothing more.
	want.Extra = nil
	for _, kv := range want.Environ() {
		if strings.HasPrefix(kv, "FLOCK_ENV=") {
			t.Errorf("Environ with no extras writes %q", kv)
		}
	}
}
