package proxyd

import (
	"fmt"

	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/secrets"
	"github.com/flockrun/flock/spec"
)

// loadIntercept reads what the proxy needs to carry cfg's secrets from
// the unit's credentials (systemd's, $CREDENTIALS_DIRECTORY, and those
// handed over since: credentials): the value of
// each secret granted to an agent, and the flock's CA; and binds each
// agent's grants, in the spec's order of secrets, with its placeholders.
// A credential missing or unreadable is an error naming it and the fix;
// none is read when no agent is granted a secret. warn is told what the
// proxy carries on through.
func loadIntercept(cr credentials, cfg proxy.Config, warn func(string, ...any)) (proxy.Intercept, error) {
	if len(cfg.Placeholders) == 0 {
		return proxy.Intercept{}, nil
	}
	restart := "run flockctl provision, which hands it to flock-proxy.service, then systemctl restart flock-proxy.service"
	b, err := cr.read(spec.SecretsCACredential)
	if err != nil {
		return proxy.Intercept{}, fmt.Errorf("the secrets' CA (credential %s, from %s): %w; %s", spec.SecretsCACredential, spec.SecretsCAPath, err, restart)
	}
	ca, err := secrets.LoadCA(b, b)
	if err != nil {
		return proxy.Intercept{}, fmt.Errorf("the secrets' CA (credential %s, from %s): %w", spec.SecretsCACredential, spec.SecretsCAPath, err)
	}
	values := map[string][]byte{}
	ic := proxy.Intercept{CA: ca, Agents: map[uint32]secrets.Bindings{}}
	for uid, grants := range cfg.Placeholders {
		id := cfg.Policy.Agents[uid].ID
		for _, s := range cfg.Secrets {
			ph, granted := grants[s.Name]
			if !granted {
				continue
			}
			v, ok := values[s.Name]
			if !ok {
				if v, err = readSecret(cr, s); err != nil {
					return proxy.Intercept{}, fmt.Errorf("%w; %s", err, restart)
				}
				values[s.Name] = v
			}
			if len(ph) != len(v) {
				// The file changed since provision drew the placeholder:
				// the swap works, an echo of the secret is not found.
				warn("secret %s: agent %d's placeholder is not the secret's length (its file changed since provision); run flockctl provision", s.Name, id)
			}
			ic.Agents[uid] = append(ic.Agents[uid], secrets.Bind(s, v, ph))
		}
	}
	return ic, nil
}

func readSecret(cr credentials, s spec.Secret) ([]byte, error) {
	cred := spec.SecretCredential(s.Name)
	b, err := cr.read(cred)
	if err != nil {
		return nil, fmt.Errorf("secret %s (credential %s, from %s): %w", s.Name, cred, s.File, err)
	}
	v, err := secrets.Value(b)
	if err != nil {
		return nil, fmt.Errorf("secret %s (credential %s, from %s): %w", s.Name, cred, s.File, err)
	}
	return v, nil
}
