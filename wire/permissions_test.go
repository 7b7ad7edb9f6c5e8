package wire

import (
	"reflect"
	"testing"
	"time"
)

// The permissions answer crosses from the bus to flockctl: encoded and
// decoded by the same code.
func TestPermissionsRoundTrip(t *testing.T) {
	for _, p := range []Permissions{
		{Agent: 3, User: "flock-3", Nkey: "UABC", Publish: SubjectRules{Allow: []string{"agent.3.>"}, Deny: []string{}},
			Subscribe: SubjectRules{Allow: []string{"_INBOX.agent.3.>"}, Deny: []string{}}, Responses: &Responses{MaxMsgs: 1, Expires: time.Minute}},
		{Agent: 4, User: "flock-4", Publish: SubjectRules{Allow: []string{}, Deny: []string{">"}}, Subscribe: SubjectRules{Allow: []string{}, Deny: []string{">"}}},
	} {
		data, err := EncodePermissions(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParsePermissions(data)
		if err != nil || !reflect.DeepEqual(got, p) {
			t.Errorf("round trip of %+v: %+v, %v", p, got, err)
		}
	}
	if _, err := ParsePermissions([]byte(`{"agent":9,"error":"agent 9 has no user on this bus"}`)); err == nil {
		t.Error("a refusal parsed as permissions")
	}
	for body, want := range map[string]int{"7": 7, "1000": 1000} {
		if id, err := ParsePermissionsRequest(PermissionsRequest(want)); id != want || err != nil || string(PermissionsRequest(want)) != body {
			t.Errorf("request %q: %d, %v", body, id, err)
		}
	}
}
