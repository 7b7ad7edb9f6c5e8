package spec

import "encoding/json"

// Secrets cross flock-proxy's config file in the spec's own shape, as
// the model APIs do (codec.go): the secrets: list and an agent's
// secrets: grants, read back by the walker that reads the spec. The
// values stay in their files; only their paths cross.

// EncodeSecrets is ss as the spec's secrets: list; nil for none.
func EncodeSecrets(ss []Secret) (json.RawMessage, error) {
	if len(ss) == 0 {
		return nil, nil
	}
	list := make([]object, len(ss))
	for i, s := range ss {
		list[i] = object{}.with("name", s.Name).with("file", s.File).with("hosts", s.Hosts).
			with("inject", encodeInject(s.Inject)).with("env", s.Env).
			with("rules", object{}.with("allow", encodeRules(s.Rules.Allow)).with("deny", encodeRules(s.Rules.Deny)))
	}
	return json.Marshal(list)
}

func encodeInject(in Inject) object {
	var basic object
	if in.BasicUser != "" {
		basic = object{}.with("user", in.BasicUser)
	}
	return object{}.with("header", in.Header).with("prefix", in.Prefix).with("basic", basic).with("query", in.Query)
}

func encodeRules(rs []RequestRule) []object {
	out := make([]object, len(rs))
	for i, r := range rs {
		out[i] = object{}.with("methods", r.Methods).with("path", r.Path)
	}
	return out
}

// DecodeSecrets reads what EncodeSecrets wrote (nil for none) as the spec
// reads its secrets: list, path naming it in the errors; the files are not
// checked against the flock's root, which the reader is not told.
func DecodeSecrets(b []byte, path string) ([]Secret, error) {
	n, err := node(b, path)
	if n == nil {
		return nil, err
	}
	w := &walker{}
	ss := w.secrets(n, path, "")
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	return ss, nil
}

// EncodeSecretGrants is an agent's secrets: grants; nil for none.
func EncodeSecretGrants(names []string) (json.RawMessage, error) {
	if len(names) == 0 {
		return nil, nil
	}
	return json.Marshal(names)
}

// DecodeSecretGrants reads what EncodeSecretGrants wrote (nil for none) as
// the spec reads an agent's secrets:, against secrets (what DecodeSecrets
// read).
func DecodeSecretGrants(b []byte, path string, secrets []Secret) ([]string, error) {
	n, err := node(b, path)
	if n == nil {
		return nil, err
	}
	w := &walker{secretNames: map[string]bool{}}
	for _, s := range secrets {
		w.secretNames[s.Name] = true
	}
	names := w.secretGrants(n, path)
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	return names, nil
}
