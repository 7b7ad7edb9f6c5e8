// Command probe is the hostile agent of the system tests. Provisioned as an
// agent's command (`probe serve`), it runs inside the real unit with every
// protection applied, and does what the test asks through files in its own
// directory: the colluder opens channels and keeps them open, the attacker
// tries to use them. Each request gets one result, so every attempt is
// reported on its own, with how long it took. The operations themselves
// are package audit/probe, which flockctl audit runs too.
//
//	probe serve          watch $HOME/probe/in/*.json, answer in $HOME/probe/out/
//	probe attempt JSON   run one request now and print its result (root's
//	                     positive controls, run from outside the unit)
//	probe heartbeats -agent ID -out FILE
//	                     as the operator (root), record agent ID's heartbeats
//	                     until SIGTERM and write their gaps as JSON
//	probe first-heartbeat -agent ID -- ARGV...
//	                     as the operator, the milliseconds from starting
//	                     ARGV to agent ID's first heartbeat
//	probe secrets-serve ADDR CA_DIR GIT_ROOT GITHUB_FILE REST_FILE
//	                     as root, the stand-ins of the APIs secrets are
//	                     for: git's smart HTTP, GitHub's API, a REST API
//	probe cgroup [-for D] [-every D] DIR...
//	                     sample cgroups (peaks, events, CPU used) and print
//	                     what they did as JSON
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/flockrun/flock/audit/probe"
)

// Request and Result are the probe package's.
type (
	Request = probe.Request
	Result  = probe.Result
)

// attemptTimeout bounds one attempt of the system tests' probe: they
// wait 10 s for an answer, so a hang must be reported well before.
const attemptTimeout = 2 * time.Second

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		if err := serve(); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
	case "attempt":
		if len(os.Args) != 3 {
			usage()
		}
		var req Request
		if err := json.Unmarshal([]byte(os.Args[2]), &req); err != nil {
			fmt.Fprintln(os.Stderr, "probe: request:", err)
			os.Exit(2)
		}
		out, _ := json.Marshal(probe.Run(req, req.Within(attemptTimeout)))
		fmt.Println(string(out))
	case "heartbeats", "cgroup", "first-heartbeat", "tls-serve", "echo-serve", "standin-serve", "secrets-serve":
		sub := map[string]func([]string) error{"heartbeats": heartbeats, "cgroup": cgroupWatch, "first-heartbeat": firstHeartbeat, "tls-serve": tlsServe, "echo-serve": echoServe,
			"standin-serve": standinServe, "secrets-serve": secretsServe}[os.Args[1]]
		if err := sub(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "probe "+os.Args[1]+":", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: probe serve | probe attempt JSON | probe heartbeats -agent ID -out FILE | probe first-heartbeat -agent ID -- ARGV | probe cgroup [-for D] DIR... | probe tls-serve ADDR | probe echo-serve ADDR | probe standin-serve ADDR (CA_DIR ANTHROPIC_KEY_FILE OPENAI_KEY_FILE GEMINI_KEY_FILE | -) | probe secrets-serve ADDR CA_DIR GIT_ROOT GITHUB_FILE REST_FILE")
	os.Exit(2)
}

// serve answers requests until killed. Requests arrive by rename, so a
// *.json file is always complete; anything else in in/ is ignored.
func serve() error {
	home := os.Getenv("HOME")
	if home == "" {
		return errors.New("HOME is not set")
	}
	base := filepath.Join(home, "probe")
	in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
	for _, d := range []string{in, out} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// ready tells the test we are up, and which PID we are.
	ready := fmt.Sprintf("{\"pid\":%d,\"uid\":%d}\n", os.Getpid(), os.Getuid())
	if err := writeAtomic(filepath.Join(base, "ready"), []byte(ready)); err != nil {
		return err
	}
	for {
		names, err := filepath.Glob(filepath.Join(in, "*.json"))
		if err != nil {
			return err
		}
		sort.Strings(names) // the test numbers requests; order matters for colluders
		for _, p := range names {
			if req, err := readRequest(p); err == nil && req.Background {
				// Taken now, answered when done: the next runs beside it.
				taken := p + ".taken"
				if os.Rename(p, taken) == nil {
					go answer(taken, out)
				}
				continue
			}
			answer(p, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readRequest(p string) (Request, error) {
	var req Request
	data, err := os.ReadFile(p)
	if err == nil {
		err = json.Unmarshal(data, &req)
	}
	return req, err
}

func answer(reqPath, outDir string) {
	var r Result
	var req Request
	data, err := os.ReadFile(reqPath)
	if err == nil {
		err = json.Unmarshal(data, &req)
	}
	if err != nil {
		r = Result{Err: "bad request: " + err.Error()}
	} else {
		r = probe.Run(req, req.Within(attemptTimeout))
	}
	b, _ := json.Marshal(r)
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(reqPath), ".taken"), ".json")
	if err := writeAtomic(filepath.Join(outDir, name+".json"), b); err != nil {
		fmt.Fprintln(os.Stderr, "probe: answer:", err)
	}
	os.Remove(reqPath)
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
