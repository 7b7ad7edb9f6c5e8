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
{{if .Secrets.ModelsDigest}}# A digest of them (keyed: it tells nothing of them) is on the next
# line, so provision sees a rotated key and hands it over at a reload:
# this unit and the streams under way go on.
# models {{.Secrets.ModelsDigest}}
{{end}}{{range .Creds}}LoadCredential={{index . 0}}:{{index . 1}}
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

// ProxySecrets are what flock-proxy.service is handed that an operator
// rotates: the secrets' files and its CA (credential name, path:
// spec.SecretCredential, spec.SecretsCACredential) with a keyed digest of
// the secrets' values, and a keyed digest of the model APIs' files (the
// creds of ProxyService).
type ProxySecrets struct {
	Creds        [][2]string
	Digest       string
	ModelsDigest string
}

var (
	// proxyDigestRe and proxyModelsDigestRe find the digests the
	// template writes.
	proxyDigestRe       = regexp.MustCompile(`(?m)^# secrets ([0-9a-f]*)$`)
	proxyModelsDigestRe = regexp.MustCompile(`(?m)^# models ([0-9a-f]*)$`)
	// proxyHandedLines are the lines of a flock-proxy.service file that
	// a credential's content, or which credentials it holds, change: the
	// digests and the secrets' and model APIs' credentials (not the
	// secrets' CA's, read at start alone). A reload reads them all
	// through what root handed over (proxyd's credentials), a new
	// provider's key and CA as a new secret's: a change of these lines
	// alone is a hand-over, no restart.
	proxyHandedLines = regexp.MustCompile(`(?m)^(# (secrets|models) [0-9a-f]*|LoadCredential=(secret|model-key|model-ca)-.*)\n`)
	proxySecretCreds = regexp.MustCompile(`(?m)^LoadCredential=secret-.*$`)
	proxyModelCreds  = regexp.MustCompile(`(?m)^LoadCredential=model-(key|ca)-.*$`)
)

// ProxyHandOver is how two flock-proxy.service files differ that differ
// in what provision hands the running proxy alone: which secrets it is
// handed (SecretCreds) or their values (Secrets), which model APIs' keys
// and CAs (ModelCreds) or their contents (Models).
type ProxyHandOver struct {
	Secrets, SecretCreds, Models, ModelCreds bool
}

// ProxySecretsChange says how flock-proxy.service files was and now
// differ, if only in the digests and credentials of the secrets and the
// model APIs (a change the proxy takes at a reload, the credentials
// handed over): ok false when they are the same or differ in more.
func ProxySecretsChange(was, now []byte) (ProxyHandOver, bool) {
	if bytes.Equal(was, now) || !bytes.Equal(proxyHandedLines.ReplaceAll(was, nil), proxyHandedLines.ReplaceAll(now, nil)) {
		return ProxyHandOver{}, false
	}
	differ := func(re *regexp.Regexp) bool {
		return !bytes.Equal(bytes.Join(re.FindAll(was, -1), []byte{'\n'}), bytes.Join(re.FindAll(now, -1), []byte{'\n'}))
	}
	return ProxyHandOver{
		Secrets: differ(proxyDigestRe), SecretCreds: differ(proxySecretCreds),
		Models: differ(proxyModelsDigestRe), ModelCreds: differ(proxyModelCreds),
	}, true
}

// ProxySecretsDigest is the digest of the secrets a flock-proxy.service
// file says it was handed ("": none).
func ProxySecretsDigest(file []byte) string { return submatch(proxyDigestRe, file) }

// ProxyModelsDigest is the digest of the model APIs' files a
// flock-proxy.service file says it was handed ("": none).
func ProxyModelsDigest(file []byte) string { return submatch(proxyModelsDigestRe, file) }

// submatch is re's first group in file ("": no match).
func submatch(re *regexp.Regexp, file []byte) string {
	if m := re.FindSubmatch(file); m != nil {
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
