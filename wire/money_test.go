package wire

// Tier: unit.

import (
	"encoding/json"
	"testing"
)

func TestMoneyIsExactAndReadsAsWritten(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  PicoUSD
		shown string
	}{
		{"20", 20 * USD, "$20.00"},
		{"0.25", USD / 4, "$0.25"},
		{"1250.75", 1250*USD + 75*USD/100, "$1,250.75"},
		{"0.0375", 375 * USD / 10000, "$0.0375"},
		{"0.000001", USD / 1e6, "$0.000001"},
		{"0.000000000375", 375, "$0.000000000375"},
		{"0", 0, "$0.00"},
	} {
		got, err := ParseUSD(tc.in)
		if err != nil || got != tc.want || got.String() != tc.shown {
			t.Errorf("%s: %d (%s), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.shown)
		}
		if back, err := ParseUSD(got.Decimal()); err != nil || back != got || got.Decimal() != tc.in {
			t.Errorf("%s: written %s, read back %d, %v", tc.in, got.Decimal(), back, err)
		}
	}
	for _, bad := range []string{"", "-1", "+1", "1.0000000000001", "1e3", "$5", "18000001", ".5", "1,000"} {
		if _, err := ParseUSD(bad); err == nil {
			t.Errorf("%q was read", bad)
		}
	}
	if s := PicoUSD(4e8).String(); s != "$0.0004" {
		t.Errorf("a fraction of a cent: %s", s)
	}
	var back struct{ C PicoUSD }
	if err := json.Unmarshal([]byte(`{"C":12.000000000375}`), &back); err != nil || back.C != 12*USD+375 {
		t.Errorf("JSON: %d, %v", back.C, err)
	}
	if b, _ := json.Marshal(struct{ C PicoUSD }{12*USD + 375}); string(b) != `{"C":12.000000000375}` {
		t.Errorf("JSON: %s", b)
	}
}

// Decimal writes what ParseUSD reads: the same amount, exactly.
func TestDecimalReadsBackExactly(t *testing.T) {
	for _, tc := range []struct {
		p    PicoUSD
		want string
	}{
		{0, "0"},
		{20 * USD, "20"},
		{USD / 4, "0.25"},
		{375 * USD / 100, "3.75"},
		{USD / 1e6, "0.000001"},
		{18_000_000 * USD, "18000000"},
		{1250*USD + 75*USD/100 + 3*USD/1e6, "1250.750003"},
	} {
		s := tc.p.Decimal()
		back, err := ParseUSD(s)
		if s != tc.want || err != nil || back != tc.p {
			t.Errorf("%d: %q read back as %d, %v; want %q", tc.p, s, back, err, tc.want)
		}
	}
	if s := PicoUSD(1).Decimal(); s != "0.000000000001" {
		t.Errorf("a picodollar: %q", s)
	}
}
