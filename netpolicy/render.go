package netpolicy

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Render prints the table Ensure would write for p, in the style of
// `nft --debug=netlink` with each value decoded beside its raw bytes. It is
// the golden-file text, and what flockctl can show an operator. Pure.
func Render(p Policy) (string, error) {
	rs, err := build(p)
	if err != nil {
		return "", err
	}
	return render(rs), nil
}

// render prints a ruleset built here or read back from the kernel. It leaves
// out what the kernel owns (handles, counter values, set and table use
// counts) and keeps everything that decides a packet's fate, so two
// renderings are equal exactly when the tables filter alike.
func render(rs *ruleset) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s\n", family(rs.table.Family), rs.table.Name)

	objs := slices.Clone(rs.objs)
	slices.SortFunc(objs, func(a, b *nftables.NamedObj) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range objs {
		kind := fmt.Sprintf("object type %d", o.Type)
		if o.Type == nftables.ObjTypeCounter {
			kind = "counter"
		}
		fmt.Fprintf(&b, "  %s %s\n", kind, o.Name)
	}

	sets := slices.Clone(rs.sets)
	slices.SortFunc(sets, func(a, b *nftables.Set) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range sets {
		fmt.Fprintf(&b, "  set %s { type %s%s }\n", s.Name, s.KeyType.Name, setFlags(s))
		if s.Dynamic {
			continue // its elements are the packet path's (counts), not the policy's
		}
		var keys []string
		for _, e := range rs.elems[s.Name] {
			keys = append(keys, element(s, e))
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "    element %s\n", k)
		}
	}

	chains := slices.Clone(rs.chains)
	slices.SortFunc(chains, func(a, b *nftables.Chain) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range chains {
		fmt.Fprintf(&b, "  chain %s {%s }\n", c.Name, chainHead(c))
		for i, r := range rs.rules[c.Name] {
			fmt.Fprintf(&b, "    rule %d%s\n", i+1, ruleNote(r.UserData))
			st := regState{}
			for _, e := range r.Exprs {
				fmt.Fprintf(&b, "      [ %s ]\n", st.expr(e))
			}
		}
	}
	return b.String()
}

func family(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	}
	return fmt.Sprintf("family(%d)", f)
}

func setFlags(s *nftables.Set) string {
	var f []string
	for _, x := range []struct {
		on   bool
		name string
	}{{s.Anonymous, "anonymous"}, {s.Constant, "constant"}, {s.Interval, "interval"}, {s.IsMap, "map"},
		{s.HasTimeout, "timeout"}, {s.Dynamic, "dynamic"}, {s.Concatenation, "concat"}} {
		if x.on {
			f = append(f, x.name)
		}
	}
	var out string
	if len(f) > 0 {
		out = "; flags " + strings.Join(f, ",")
	}
	if s.Timeout != 0 {
		out += fmt.Sprintf("; timeout %v", s.Timeout)
	}
	if s.Size != 0 {
		out += fmt.Sprintf("; size %d", s.Size)
	}
	return out
}

func element(s *nftables.Set, e nftables.SetElement) string {
	k := "0x" + hex.EncodeToString(e.Key)
	switch {
	case s.KeyType.Name == nftables.TypeUID.Name && len(e.Key) == 4:
		k = fmt.Sprintf("%d", binaryutil.NativeEndian.Uint32(e.Key))
	case s.KeyType.Name == nftables.TypeIPAddr.Name || s.KeyType.Name == nftables.TypeIP6Addr.Name:
		if a, ok := netip.AddrFromSlice(e.Key); ok {
			k += " (" + a.String() + ")"
		}
	case s.KeyType.Name == nftables.TypeFIBAddr.Name && len(e.Key) == 4:
		k += " (" + fibTypeName(binaryutil.NativeEndian.Uint32(e.Key)) + ")"
	}
	if len(e.Val) > 0 || e.IntervalEnd || e.Timeout != 0 {
		k += fmt.Sprintf(" val 0x%x interval-end %v timeout %v", e.Val, e.IntervalEnd, e.Timeout)
	}
	return k
}

func chainHead(c *nftables.Chain) string {
	var s string
	if c.Type != "" {
		s += " type " + string(c.Type)
	}
	if c.Hooknum != nil {
		s += " hook " + hookName(*c.Hooknum)
	}
	if c.Priority != nil {
		s += fmt.Sprintf(" priority %d;", *c.Priority)
	}
	if c.Policy != nil {
		s += " policy " + map[nftables.ChainPolicy]string{nftables.ChainPolicyAccept: "accept", nftables.ChainPolicyDrop: "drop"}[*c.Policy]
	}
	return s
}

func hookName(h nftables.ChainHook) string {
	switch h {
	case *nftables.ChainHookPrerouting:
		return "prerouting"
	case *nftables.ChainHookInput:
		return "input"
	case *nftables.ChainHookForward:
		return "forward"
	case *nftables.ChainHookOutput:
		return "output"
	case *nftables.ChainHookPostrouting:
		return "postrouting"
	}
	return fmt.Sprintf("%d", h)
}

// ruleNote shows a rule's comment; anything else in its user data is shown
// raw, so it still takes part in the comparison.
func ruleNote(ud []byte) string {
	if len(ud) == 0 {
		return ""
	}
	c, ok := userdata.GetString(ud, userdata.TypeComment)
	if ok && bytes.Equal(ud, userdata.AppendString(nil, userdata.TypeComment, c)) {
		return fmt.Sprintf(" comment %q", c)
	}
	return fmt.Sprintf(" userdata 0x%x", ud)
}

// regState remembers what the last load put in register 1, so a comparison
// can print its operand decoded (a uid, an address, a port) next to the raw
// bytes. Decoding is only a reading aid; the raw bytes are always printed.
type regState struct {
	loaded  string // "skuid", "nfproto", "l4proto", "daddr", "saddr", "dport", "tcpflags", or ""
	nfproto byte
}

func (st *regState) expr(e expr.Any) string {
	switch e := e.(type) {
	case *expr.Meta:
		name := metaName(e.Key)
		if e.SourceRegister {
			st.loaded = ""
			return fmt.Sprintf("meta set %s with reg %d", name, e.Register)
		}
		st.loaded = name
		return fmt.Sprintf("meta load %s => reg %d", name, e.Register)
	case *expr.Payload:
		st.loaded = ""
		switch {
		case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 16 && st.nfproto == unix.NFPROTO_IPV4,
			e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 24 && st.nfproto == unix.NFPROTO_IPV6:
			st.loaded = "daddr"
		case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 12 && st.nfproto == unix.NFPROTO_IPV4,
			e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 8 && st.nfproto == unix.NFPROTO_IPV6:
			st.loaded = "saddr"
		case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2:
			st.loaded = "dport"
		case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 13 && e.Len == 1:
			st.loaded = "tcpflags"
		}
		s := fmt.Sprintf("payload load %db @ %s header + %d => reg %d", e.Len, baseName(e.Base), e.Offset, e.DestRegister)
		if e.OperationType != expr.PayloadLoad || e.CsumType != 0 || e.CsumOffset != 0 || e.CsumFlags != 0 {
			s += fmt.Sprintf(" op %d csum %d/%d/%d", e.OperationType, e.CsumType, e.CsumOffset, e.CsumFlags)
		}
		return s
	case *expr.Cmp:
		if st.loaded == "nfproto" && len(e.Data) == 1 {
			st.nfproto = e.Data[0]
		}
		return fmt.Sprintf("cmp %s reg %d 0x%x%s", cmpName(e.Op), e.Register, e.Data, st.decode(e.Data))
	case *expr.Bitwise:
		return fmt.Sprintf("bitwise reg %d = ( reg %d & 0x%x ) ^ 0x%x, len %d", e.DestRegister, e.SourceRegister, e.Mask, e.Xor, e.Len)
	case *expr.Lookup:
		s := fmt.Sprintf("lookup reg %d set %s", e.SourceRegister, e.SetName)
		if e.IsDestRegSet {
			s += fmt.Sprintf(" dreg %d", e.DestRegister)
		}
		if e.Invert {
			s += " inverted"
		}
		return s
	case *expr.Fib:
		st.loaded = ""
		var what []string
		for _, f := range []struct {
			on   bool
			name string
		}{{e.FlagSADDR, "saddr"}, {e.FlagDADDR, "daddr"}, {e.FlagMARK, "mark"}, {e.FlagIIF, "iif"}, {e.FlagOIF, "oif"},
			{e.FlagPRESENT, "present"}, {e.ResultOIF, "oif"}, {e.ResultOIFNAME, "oifname"}, {e.ResultADDRTYPE, "type"}} {
			if f.on {
				what = append(what, f.name)
			}
		}
		return fmt.Sprintf("fib %s => reg %d", strings.Join(what, " "), e.Register)
	case *expr.Objref:
		return fmt.Sprintf("objref type %d name %s", e.Type, e.Name)
	case *expr.Counter:
		return "counter" // its values are the kernel's, not the policy's
	case *expr.Limit:
		return fmt.Sprintf("limit rate %d/%s burst %d type %s over %v", e.Rate, unitName(e.Unit), e.Burst,
			map[expr.LimitType]string{expr.LimitTypePkts: "packets", expr.LimitTypePktBytes: "bytes"}[e.Type], e.Over)
	case *expr.Log:
		level := expr.LogLevelWarning // the kernel's default when none is sent
		if e.Key&(1<<unix.NFTA_LOG_LEVEL) != 0 {
			level = e.Level
		}
		s := fmt.Sprintf("log prefix %q level %d flags 0x%x", e.Data, level, e.Flags)
		if e.Flags&expr.LogFlagsUID != 0 {
			s += " (skuid)"
		}
		if e.Key&(1<<unix.NFTA_LOG_GROUP) != 0 {
			s += fmt.Sprintf(" group %d snaplen %d qthreshold %d", e.Group, e.Snaplen, e.QThreshold)
		}
		return s
	case *expr.Reject:
		return fmt.Sprintf("reject type %d code %d%s", e.Type, e.Code, rejectName(e))
	case *expr.Verdict:
		s := fmt.Sprintf("immediate reg 0 %s", verdictName(e.Kind))
		if e.Chain != "" {
			s += " chain " + e.Chain
		}
		return s
	case *expr.Immediate:
		return fmt.Sprintf("immediate reg %d 0x%x", e.Register, e.Data)
	case *expr.Dynset:
		s := fmt.Sprintf("dynset %s reg_key %d set %s", dynsetOp(e.Operation), e.SrcRegKey, e.SetName)
		if e.SrcRegData != 0 {
			s += fmt.Sprintf(" sreg_data %d", e.SrcRegData)
		}
		if e.Timeout != 0 {
			s += fmt.Sprintf(" timeout %v", e.Timeout)
		}
		if e.Invert {
			s += " inverted"
		}
		for _, x := range e.Exprs {
			s += " expr [ " + (&regState{}).expr(x) + " ]"
		}
		return s
	}
	return fmt.Sprintf("%T %+v", e, e)
}

func (st *regState) decode(d []byte) string {
	switch st.loaded {
	case "skuid":
		if len(d) == 4 {
			return fmt.Sprintf(" (uid %d)", binaryutil.NativeEndian.Uint32(d))
		}
	case "nfproto":
		if len(d) == 1 {
			switch d[0] {
			case unix.NFPROTO_IPV4:
				return " (ipv4)"
			case unix.NFPROTO_IPV6:
				return " (ipv6)"
			}
		}
	case "l4proto":
		if len(d) == 1 {
			if n, ok := map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp", unix.IPPROTO_ICMP: "icmp", unix.IPPROTO_ICMPV6: "icmpv6"}[d[0]]; ok {
				return " (" + n + ")"
			}
		}
	case "dport":
		if len(d) == 2 {
			return fmt.Sprintf(" (port %d)", binaryutil.BigEndian.Uint16(d))
		}
	case "daddr", "saddr":
		n := 4
		if st.nfproto == unix.NFPROTO_IPV6 {
			n = 16
		}
		if len(d) <= n {
			full := make([]byte, n)
			copy(full, d)
			a, _ := netip.AddrFromSlice(full)
			if len(d) == n {
				return " (" + a.String() + ")"
			}
			return fmt.Sprintf(" (%s/%d)", a, len(d)*8)
		}
	}
	return ""
}

func metaName(k expr.MetaKey) string {
	if n, ok := map[expr.MetaKey]string{
		expr.MetaKeySKUID: "skuid", expr.MetaKeySKGID: "skgid", expr.MetaKeyNFPROTO: "nfproto",
		expr.MetaKeyL4PROTO: "l4proto", expr.MetaKeyPROTOCOL: "protocol", expr.MetaKeyMARK: "mark",
		expr.MetaKeyOIF: "oif", expr.MetaKeyIIF: "iif", expr.MetaKeyOIFNAME: "oifname", expr.MetaKeyIIFNAME: "iifname",
	}[k]; ok {
		return n
	}
	return fmt.Sprintf("key(%d)", k)
}

func baseName(b expr.PayloadBase) string {
	return map[expr.PayloadBase]string{
		expr.PayloadBaseLLHeader: "link", expr.PayloadBaseNetworkHeader: "network",
		expr.PayloadBaseTransportHeader: "transport",
	}[b]
}

func cmpName(op expr.CmpOp) string {
	return map[expr.CmpOp]string{expr.CmpOpEq: "eq", expr.CmpOpNeq: "neq", expr.CmpOpLt: "lt",
		expr.CmpOpLte: "lte", expr.CmpOpGt: "gt", expr.CmpOpGte: "gte"}[op]
}

func unitName(u expr.LimitTime) string {
	if n, ok := map[expr.LimitTime]string{expr.LimitTimeSecond: "second", expr.LimitTimeMinute: "minute",
		expr.LimitTimeHour: "hour", expr.LimitTimeDay: "day", expr.LimitTimeWeek: "week"}[u]; ok {
		return n
	}
	return fmt.Sprintf("%ds", u)
}

func rejectName(e *expr.Reject) string {
	switch {
	case e.Type == unix.NFT_REJECT_TCP_RST:
		return " (tcp reset)"
	case e.Type == unix.NFT_REJECT_ICMPX_UNREACH && e.Code == unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED:
		return " (icmpx admin-prohibited)"
	}
	return ""
}

func dynsetOp(op uint32) string {
	if n, ok := map[uint32]string{unix.NFT_DYNSET_OP_ADD: "add", unix.NFT_DYNSET_OP_UPDATE: "update"}[op]; ok {
		return n
	}
	return fmt.Sprintf("op(%d)", op)
}

func verdictName(k expr.VerdictKind) string {
	if n, ok := map[expr.VerdictKind]string{expr.VerdictAccept: "accept", expr.VerdictDrop: "drop",
		expr.VerdictReturn: "return", expr.VerdictJump: "jump", expr.VerdictGoto: "goto",
		expr.VerdictContinue: "continue", expr.VerdictBreak: "break"}[k]; ok {
		return n
	}
	return fmt.Sprintf("verdict(%d)", k)
}

func fibTypeName(t uint32) string {
	if n, ok := map[uint32]string{unix.RTN_UNICAST: "unicast", unix.RTN_LOCAL: "local", unix.RTN_BROADCAST: "broadcast",
		unix.RTN_ANYCAST: "anycast", unix.RTN_MULTICAST: "multicast"}[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", t)
}
