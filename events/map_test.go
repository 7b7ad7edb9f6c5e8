package events

import (
	"net/netip"
	"testing"
	"time"

	"github.com/flockrun/flock/proxy"
)

const testUIDBase = 2000000000

// TestMapTrustsOnlyWhoWroteIt: an entry is an event only if the fields
// journald sets itself say flock, systemd or the kernel wrote it. Agents
// can write to the journal too (its socket is open to every uid), with
// any fields they like.
//
// Tier: unit (no root).
func TestMapTrustsOnlyWhoWroteIt(t *testing.T) {
	ts := "1795766400000000"
	agentUnit := "flock-agent@2.service"
	rec := func(k Kind, agent string, trusted map[string]string) Entry {
		e := Entry{"__REALTIME_TIMESTAMP": ts, FieldEvent: string(k), FieldAgent: agent, FieldDetail: "d", "_TRANSPORT": "journal"}
		for f, v := range trusted {
			e[f] = v
		}
		return e
	}
	proxyDeny := Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "journal", "_SYSTEMD_UNIT": proxyUnit}
	for k, v := range (proxy.Record{Agent: 1, UID: testUIDBase + 1, Name: "evil.example.com", Port: 443, Reason: proxy.ReasonNoRule,
		Addr: netip.MustParseAddr("192.0.2.1")}).Fields() {
		proxyDeny[k] = v
	}
	proxyDeny["SUPPRESSED"] = "3"
	proxyAllow := Entry{}
	for k, v := range proxyDeny {
		proxyAllow[k] = v
	}
	proxyAllow["DECISION"] = "allow"
	forgedProxy := Entry{}
	for k, v := range proxyDeny {
		forgedProxy[k] = v
	}
	forgedProxy["_SYSTEMD_UNIT"] = agentUnit
	for _, tc := range []struct {
		name   string
		e      Entry
		ok     bool
		kind   Kind
		agent  int
		detail string
	}{
		{"the bus's violation", rec(BusViolation, "2", map[string]string{"_SYSTEMD_UNIT": busUnit}), true, BusViolation, 2, "d"},
		{"a violation an agent wrote", rec(BusViolation, "1", map[string]string{"_SYSTEMD_UNIT": agentUnit, "_UID": "2000000002"}), false, "", 0, ""},
		{"a dead letter of the bus", rec(DeadLettered, "0", map[string]string{"_SYSTEMD_UNIT": busUnit}), true, DeadLettered, 0, "d"},
		{"the bus's damaged store", rec(StoreDamaged, "0", map[string]string{"_SYSTEMD_UNIT": busUnit}), true, StoreDamaged, 0, "d"},
		{"a damaged store an agent claims", rec(StoreDamaged, "0", map[string]string{"_SYSTEMD_UNIT": agentUnit, "_UID": "2000000002"}), false, "", 0, ""},
		{"drift written by root", rec(DriftRepaired, "3", map[string]string{"_UID": "0"}), true, DriftRepaired, 3, "d"},
		{"drift an agent wrote", rec(DriftFound, "3", map[string]string{"_UID": "2000000002", "_SYSTEMD_UNIT": agentUnit}), false, "", 0, ""},
		{"a start an agent claims in a record", rec(Started, "3", map[string]string{"_UID": "0"}), false, "", 0, ""},
		{"systemd's message from an agent, not PID 1", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "journal", "_PID": "77",
			"MESSAGE_ID": msgOutOfMemory, "UNIT": "flock-agent@1.service"}, false, "", 0, ""},
		{"systemd's about another unit", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "journal", "_PID": "1",
			"MESSAGE_ID": msgStarted, "UNIT": "ssh.service"}, false, "", 0, ""},
		{"systemd's about a malformed agent unit", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "journal", "_PID": "1",
			"MESSAGE_ID": msgStarted, "UNIT": "flock-agent@x.service"}, false, "", 0, ""},
		{"systemd's about the bus", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "journal", "_PID": "1",
			"MESSAGE_ID": msgStarted, "UNIT": busUnit}, true, Started, 0, "flock.service started"},
		{"the proxy's denial", proxyDeny, true, EgressDenied, 1,
			"CONNECT evil.example.com:443 refused: no-rule (3 more denials of this agent before it not logged)"},
		{"the proxy's allowance", proxyAllow, false, "", 0, ""},
		{"a denial an agent wrote", forgedProxy, false, "", 0, ""},
		{"the kernel's firewall line", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "kernel",
			"MESSAGE": "flock-deny IN= OUT=lo SRC=127.0.0.1 DST=127.0.0.1 LEN=60 TOS=0x00 PREC=0x00 TTL=64 ID=4011 DF PROTO=TCP SPT=40112 DPT=8222 WINDOW=65495 RES=0x00 SYN URGP=0 UID=2000000003 GID=2000000003 "},
			true, FirewallRefused, 3, "TCP to 127.0.0.1:8222 refused by table inet flock (kernel log; at most 5 a minute per agent)"},
		{"the kernel's firewall line, IPv6", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "kernel",
			"MESSAGE": "flock-deny IN= OUT=lo SRC=::1 DST=::1 LEN=80 TC=0 HOPLIMIT=64 FLOWLBL=1 PROTO=UDP SPT=5 DPT=53 LEN=40 UID=2000000007 GID=2000000007"},
			true, FirewallRefused, 7, "UDP to [::1]:53 refused by table inet flock (kernel log; at most 5 a minute per agent)"},
		{"a firewall line of a uid outside the flock", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "kernel",
			"MESSAGE": "flock-deny IN= OUT=lo PROTO=TCP UID=1000 GID=1000"}, false, "", 0, ""},
		{"another kernel line", Entry{"__REALTIME_TIMESTAMP": ts, "_TRANSPORT": "kernel", "MESSAGE": "eth0: link up UID=2000000003"}, false, "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := Map(tc.e, testUIDBase)
			if ok != tc.ok {
				t.Fatalf("Map ok = %v, want %v (%+v)", ok, tc.ok, m.Event)
			}
			if !ok {
				return
			}
			if m.Kind != tc.kind || m.Agent != tc.agent || m.Detail != tc.detail || !m.Time.Equal(time.UnixMicro(1795766400000000)) {
				t.Errorf("Map = %+v, want %s of agent %d: %q", m.Event, tc.kind, tc.agent, tc.detail)
			}
		})
	}
}
