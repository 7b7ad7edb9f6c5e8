package units

import (
	"bytes"
	"regexp"
	"text/template"
)

// ProxyUnit is the static unit of the egress proxy, `flockctl proxy`,
// which carries the TLS of agents with names in their egress.
const ProxyUnit = "flock-proxy.service"

// proxyTemplate is the bus's hardening with two differences, both because
// the proxy asks the kernel who owns each client's socket (sock_diag):
// AF_NETLINK is allowed, and there is no PrivateUsers=, in whose user
// namespace every agent's uid would read as the overflow uid 65534. Its
// own dynamic uid is not an agent's, so the agents' firewall chain does
// not apply to the connections it makes.
var proxyTemplate = template.Must(template.New(ProxyUnit).Parse(`# Written by flockctl provision; flockctl deprovision --all removes it.
{{if .Build}}# flockctl build {{.Build}}: a new flockctl rewrites this file and restarts the proxy.
{{end}}[Unit]
Description=flock egress proxy: carries agents' TLS to the names their spec allows
Documentation=https://github.com/flockrun/flock
StartLimitIntervalSec=0

[Service]
Type=notify
# Its bus identity (the seed, root's alone), which systemd hands it as a
# credential: it publishes each decision on flock.egress.<id>.
LoadCredential=nats:{{.Seed}}
{{if .Creds}}# The model APIs' keys (and private CAs): root's files, handed to this
# unit alone; no agent's unit, environment or files hold them.
{{range .Creds}}LoadCredential={{index . 0}}:{{index . 1}}
{{end}}{{end}}{{if .Secrets.Creds}}# The secrets' files and its CA's certificate and key: root's, handed to
# this unit alone; agents hold placeholders, which it swaps for the
# secrets. A digest of them (keyed: it tells nothing of them) is on the
# next line, so provision sees a changed secret and hands it over at a
# reload: this unit goes on, and no agent restarts.
# secrets {{.Secrets.Digest}}
{{range .Secrets.Creds}}LoadCredential={{index . 0}}:{{index . 1}}
{{end}}{{end}}# The model gateway's counts, kept across restarts and reboots.
StateDirectory=flock-proxy
# Where provision hands over a rotated credential at a reload: this
# unit's uid's alone, and removed at its stop.
RuntimeDirectory=flock-proxy
RuntimeDirectoryMode=0700
ExecStart={{.Bin}} proxy --config {{.Config}} --nkey %d/nats
ExecReload=/bin/kill -HUP $MAINPID
Restart=always
RestartSec=1
DynamicUser=yes
User=flock-proxy
` + proxyBounds + ownWalls + `ProtectProc=invisible
ProcSubset=pid
RemoveIPC=yes
` + kernelWalls + `SystemCallFilter=~@privileged @resources
SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK
DevicePolicy=closed

[Install]
WantedBy=multi-user.target
`))

// ProxySecrets are the secrets flock-proxy.service is handed: their files
// and its CA (credential name, path: spec.SecretCredential,
// spec.SecretsCACredential), and a keyed digest of their contents.
type ProxySecrets struct {
	Creds  [][2]string
	Digest string
}

// proxyDigestRe finds the digest the template writes.
var proxyDigestRe = regexp.MustCompile(`(?m)^# secrets ([0-9a-f]*)$`)

// proxySecretLines are the lines of a flock-proxy.service file that a
// secret's value, or which secrets it holds, change: the digest and the
// secrets' credentials (not the CA's, read at start alone).
var (
	proxySecretLines = regexp.MustCompile(`(?m)^(# secrets [0-9a-f]*|LoadCredential=secret-.*)\n`)
	proxySecretCreds = regexp.MustCompile(`(?m)^LoadCredential=secret-.*$`)
)

// ProxySecretsChange says how flock-proxy.service files was and now
// differ: only in the secrets' digest and credentials (a change the
// proxy takes at a reload, the secrets handed over), and if so whether
// which secrets it holds changed too.
func ProxySecretsChange(was, now []byte) (secretsOnly, credsChanged bool) {
	if bytes.Equal(was, now) || !bytes.Equal(proxySecretLines.ReplaceAll(was, nil), proxySecretLines.ReplaceAll(now, nil)) {
		return false, false
	}
	creds := func(file []byte) []byte { return bytes.Join(proxySecretCreds.FindAll(file, -1), []byte{'\n'}) }
	return true, !bytes.Equal(creds(was), creds(now))
}

// ProxySecretsDigest is the digest of the secrets a flock-proxy.service
// file says it was handed ("": none).
func ProxySecretsDigest(file []byte) string {
	if m := proxyDigestRe.FindSubmatch(file); m != nil {
		return string(m[1])
	}
	return ""
}

// ProxyService is the text of flock-proxy.service for a proxy reading
// configPath and its bus seed at seed, run by the flockctl of build id
// build ("" unknown); creds are the model APIs' files (credential name,
// path) it is handed, sec the secrets'.
func ProxyService(bin, build, configPath, seed string, sec ProxySecrets, creds ...[2]string) []byte {
	if bin == "" {
		bin = DefaultFlockctlBin
	}
	var b bytes.Buffer
	if err := proxyTemplate.Execute(&b, struct {
		Bin, Build, Config, Seed string
		Creds                    [][2]string
		Secrets                  ProxySecrets
	}{bin, build, configPath, seed, creds, sec}); err != nil {
		panic(err) // the template and its strings cannot fail
	}
	return b.Bytes()
}
