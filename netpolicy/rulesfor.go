package netpolicy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// RulesFor reads table inet flock as the kernel has it and returns, in
// chain order, every rule that applies to packets of uid, each as
// `nft list` prints it. No table: none, no error.
func (n *NFT) RulesFor(ctx context.Context, uid uint32) ([]string, error) {
	rs, ok, err := n.current(ctx)
	if err != nil || !ok {
		return nil, err
	}
	return rulesFor(rs, uid), nil
}

// PlannedRulesFor is what RulesFor reads once p is in force. Pure.
func PlannedRulesFor(p Policy, uid uint32) ([]string, error) {
	rs, err := build(p)
	if err != nil {
		return nil, err
	}
	return rulesFor(rs, uid), nil
}

// rulesFor is every rule of rs (chain by chain, in order) that can match
// a packet of uid: one with no uid match at all, or whose uid match holds
// for uid. A rule added by hand is shown like one of ours. The input
// chain of a multi-host flock is left out: it judges by source address,
// never by uid, and only packets to the cluster port, which the output
// chain refuses to every agent before any allowance.
func rulesFor(rs *ruleset, uid uint32) []string {
	var out []string
	for _, c := range rs.chains {
		if c.Name == InputChain {
			continue
		}
		for _, r := range rs.rules[c.Name] {
			if appliesTo(rs, r, uid) {
				out = append(out, nftSyntax(r))
			}
		}
	}
	return out
}

// appliesTo reads the rule's skuid matches (a set lookup or a compare
// right after meta skuid); every one must hold for uid.
func appliesTo(rs *ruleset, r *nftables.Rule, uid uint32) bool {
	key := binaryutil.NativeEndian.PutUint32(uid)
	skuid := false
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Meta:
			skuid = !e.SourceRegister && e.Key == expr.MetaKeySKUID
			continue
		case *expr.Lookup:
			if skuid {
				in := false
				for _, el := range rs.elems[e.SetName] {
					in = in || string(el.Key) == string(key)
				}
				if in == e.Invert {
					return false
				}
			}
		case *expr.Cmp:
			if skuid && (e.Op == expr.CmpOpEq) != (string(e.Data) == string(key)) {
				return false
			}
		}
		skuid = false
	}
	return true
}

// nftSyntax prints r as `nft list` does for the statements flock writes
// (and the usual ones added by hand); anything else is shown in the
// netlink form of Render between brackets, so nothing is hidden.
func nftSyntax(r *nftables.Rule) string {
	var parts []string
	st := regState{}
	var pending string // a meta load waiting for its compare
	var proto string   // "ip"/"ip6" after an nfproto match, "tcp"/"udp" after l4proto
	var mask []byte
	for i, e := range r.Exprs {
		raw := st.expr(e)
		switch e := e.(type) {
		case *expr.Meta:
			if e.SourceRegister {
				parts = append(parts, "["+raw+"]")
				continue
			}
			pending = metaName(e.Key)
			continue
		case *expr.Payload:
			switch st.loaded {
			case "daddr":
				pending = "daddr"
			case "saddr":
				pending = "saddr"
			case "dport":
				pending = "dport"
			case "tcpflags":
				pending = "tcpflags"
			default:
				parts = append(parts, "["+raw+"]")
			}
			continue
		case *expr.Bitwise:
			if (pending == "daddr" || pending == "tcpflags") && isZero(e.Xor) {
				mask = e.Mask
				continue
			}
		case *expr.Lookup:
			if pending != "" {
				neg := ""
				if e.Invert {
					neg = "!= "
				}
				subject := "meta " + pending
				switch pending {
				case "daddr", "saddr":
					subject = proto + " " + pending
				case "fib daddr type":
					subject = pending
				}
				parts = append(parts, fmt.Sprintf("%s %s@%s", subject, neg, e.SetName))
				pending = ""
				continue
			}
		case *expr.Cmp:
			op := ""
			if e.Op != expr.CmpOpEq {
				op = map[expr.CmpOp]string{expr.CmpOpNeq: "!= ", expr.CmpOpLt: "< ", expr.CmpOpLte: "<= ", expr.CmpOpGt: "> ", expr.CmpOpGte: ">= "}[e.Op]
			}
			switch pending {
			case "skuid":
				if len(e.Data) == 4 {
					parts = append(parts, fmt.Sprintf("meta skuid %s%d", op, binaryutil.NativeEndian.Uint32(e.Data)))
					pending = ""
					continue
				}
			case "nfproto":
				if len(e.Data) == 1 && (e.Data[0] == unix.NFPROTO_IPV4 || e.Data[0] == unix.NFPROTO_IPV6) {
					proto = map[byte]string{unix.NFPROTO_IPV4: "ip", unix.NFPROTO_IPV6: "ip6"}[e.Data[0]]
					pending = ""
					// nft folds the version check into the address match
					// that follows; alone, it prints it.
					if !nextIsPayload(r.Exprs[i+1:]) {
						parts = append(parts, "meta nfproto "+map[string]string{"ip": "ipv4", "ip6": "ipv6"}[proto])
					}
					continue
				}
			case "l4proto":
				if n, ok := map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[firstByte(e.Data)]; ok && len(e.Data) == 1 {
					proto, pending = n, ""
					if !nextIsPayload(r.Exprs[i+1:]) {
						parts = append(parts, "meta l4proto "+n)
					}
					continue
				}
			case "daddr":
				if a, ok := netip.AddrFromSlice(pad(e.Data, proto)); ok {
					bits := len(e.Data) * 8
					if mask != nil {
						bits = ones(mask)
					}
					s := a.String()
					if bits < a.BitLen() {
						s = netip.PrefixFrom(a, bits).String()
					}
					parts = append(parts, fmt.Sprintf("%s daddr %s%s", proto, op, s))
					pending, mask = "", nil
					continue
				}
			case "tcpflags":
				if len(e.Data) == 1 && len(mask) == 1 && op == "" {
					parts = append(parts, fmt.Sprintf("tcp flags %s / %s", tcpFlags(e.Data[0]), tcpFlags(mask[0])))
					pending, mask = "", nil
					continue
				}
			case "dport":
				if len(e.Data) == 2 {
					parts = append(parts, fmt.Sprintf("%s dport %s%d", proto, op, binaryutil.BigEndian.Uint16(e.Data)))
					pending = ""
					continue
				}
			}
		case *expr.Dynset:
			if stmts, ok := dynsetStmts(e); ok && pending != "" && e.Operation == unix.NFT_DYNSET_OP_UPDATE && e.SrcRegData == 0 && e.Timeout == 0 && !e.Invert {
				parts = append(parts, fmt.Sprintf("update @%s { meta %s%s }", e.SetName, pending, stmts))
				pending = ""
				continue
			}
		case *expr.Fib:
			// The host guard's `fib daddr type != @hosttypes`.
			if e.FlagDADDR && e.ResultADDRTYPE && !e.FlagSADDR && !e.FlagMARK && !e.FlagIIF && !e.FlagOIF && !e.FlagPRESENT {
				pending = "fib daddr type"
				continue
			}
		case *expr.Objref:
			if e.Type == int(nftables.ObjTypeCounter) {
				parts = append(parts, fmt.Sprintf("counter name %q", e.Name))
				continue
			}
		case *expr.Counter:
			parts = append(parts, "counter") // its values are the kernel's
			continue
		case *expr.Limit:
			if s := limitSyntax(e); s != "" {
				parts = append(parts, s)
				continue
			}
		case *expr.Log:
			s := "log"
			if e.Key&(1<<unix.NFTA_LOG_PREFIX) != 0 {
				s += fmt.Sprintf(" prefix %q", e.Data)
			}
			if e.Key&(1<<unix.NFTA_LOG_LEVEL) != 0 && e.Level != expr.LogLevelWarning {
				s += fmt.Sprintf(" level %d", e.Level)
			}
			if e.Flags == expr.LogFlagsUID {
				s += " flags skuid"
			} else if e.Flags != 0 {
				s += fmt.Sprintf(" flags 0x%x", e.Flags)
			}
			parts = append(parts, s)
			continue
		case *expr.Reject:
			if n := rejectName(e); n != "" {
				parts = append(parts, "reject with "+strings.Trim(n, " ()"))
				continue
			}
		case *expr.Verdict:
			if e.Chain == "" {
				parts = append(parts, verdictName(e.Kind))
				continue
			}
			parts = append(parts, verdictName(e.Kind)+" "+e.Chain)
			continue
		}
		if pending != "" {
			parts = append(parts, "[meta load "+pending+"]")
			pending = ""
		}
		parts = append(parts, "["+raw+"]")
	}
	if pending != "" {
		parts = append(parts, "[meta load "+pending+"]")
	}
	if c, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok {
		parts = append(parts, fmt.Sprintf("comment %q", c))
	}
	return strings.Join(parts, " ")
}

// tcpFlags names the flags of a tcp flags byte as nft does: "syn,ack".
func tcpFlags(b byte) string {
	var names []string
	for i, n := range []string{"fin", "syn", "rst", "psh", "ack", "urg", "ecn", "cwr"} {
		if b&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

func limitSyntax(e *expr.Limit) string {
	over := ""
	if e.Over {
		over = "over "
	}
	switch e.Type {
	case expr.LimitTypePkts:
		s := fmt.Sprintf("limit rate %s%d/%s", over, e.Rate, unitName(e.Unit))
		if e.Burst != 5 && e.Burst != 0 { // nft's default burst is 5
			s += fmt.Sprintf(" burst %d packets", e.Burst)
		}
		return s
	case expr.LimitTypePktBytes:
		s := fmt.Sprintf("limit rate %s%s/%s", over, byteUnits(e.Rate), unitName(e.Unit))
		if e.Burst != 0 {
			s += " burst " + byteUnits(uint64(e.Burst))
		}
		return s
	}
	return ""
}

// byteUnits writes a byte count as nft does: in the largest of bytes,
// kbytes, mbytes that holds it whole.
func byteUnits(n uint64) string {
	switch {
	case n != 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%d mbytes", n>>20)
	case n != 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%d kbytes", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// dynsetStmts prints the statements an update keeps per element, for the
// ones flock uses (counter, limit); ok is false for any other.
func dynsetStmts(e *expr.Dynset) (string, bool) {
	var s string
	for _, x := range e.Exprs {
		switch x := x.(type) {
		case *expr.Counter:
			s += " counter"
		case *expr.Limit:
			l := limitSyntax(x)
			if l == "" {
				return "", false
			}
			s += " " + l
		default:
			return "", false
		}
	}
	return s, len(e.Exprs) > 0
}

func nextIsPayload(rest []expr.Any) bool {
	if len(rest) == 0 {
		return false
	}
	_, ok := rest[0].(*expr.Payload)
	return ok
}

func firstByte(d []byte) byte {
	if len(d) == 0 {
		return 0
	}
	return d[0]
}

// pad widens a byte-aligned prefix's bytes to a whole address of proto.
func pad(d []byte, proto string) []byte {
	n := 4
	if proto == "ip6" {
		n = 16
	}
	if len(d) > n {
		return d
	}
	full := make([]byte, n)
	copy(full, d)
	return full
}

func ones(mask []byte) int {
	n := 0
	for _, b := range mask {
		for ; b != 0; b <<= 1 {
			n++
		}
	}
	return n
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
