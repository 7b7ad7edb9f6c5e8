package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// PicoUSD is an amount of money in millionths of a millionth of a US
// dollar: a price per million tokens in USD, times a million, is the
// price of one token in PicoUSD, so every provider's price (down to
// $0.0001 per million tokens) is a whole number, and a cost is exact to
// the last token: no rounding until it is shown. A uint64 holds 18
// million dollars.
type PicoUSD uint64

// USD is a whole dollar.
const USD PicoUSD = 1e12

// String is p in dollars for a reader: to the cent at least ($20.00,
// $1,204.07), with up to six decimals when it has them ($0.005,
// $0.000144), and a smaller amount exactly ($0.000000375).
func (p PicoUSD) String() string {
	if p > 0 && p < 1e6 {
		return "$" + p.Decimal()
	}
	micro := (uint64(p) + 5e5) / 1e6 // rounded to the millionth of a dollar
	whole := strconv.FormatUint(micro/1e6, 10)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", micro%1e6), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return "$" + whole + "." + frac
}

// ParseUSD reads a number of dollars as the spec and the JSON write it
// ("20", "0.5", "1250.75", at most 12 decimals: a PicoUSD) exactly, with
// no float on the way.
func ParseUSD(s string) (PicoUSD, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 12 || strings.HasPrefix(whole, "+") || strings.HasPrefix(whole, "-") {
		return 0, fmt.Errorf("%q is not an amount of dollars; write a number, e.g. 20 or 0.25", s)
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > 18_000_000 {
		return 0, fmt.Errorf("%q is not an amount of dollars from 0 to 18000000; write e.g. 20 or 0.25", s)
	}
	f := uint64(0)
	if frac != "" {
		if f, err = strconv.ParseUint(frac+strings.Repeat("0", 12-len(frac)), 10, 64); err != nil {
			return 0, fmt.Errorf("%q is not an amount of dollars; write e.g. 20 or 0.25", s)
		}
	}
	return PicoUSD(w)*USD + PicoUSD(f), nil
}

// Decimal is p in dollars, exactly, as ParseUSD reads it back ("20",
// "0.25", "0.000000375").
func (p PicoUSD) Decimal() string {
	whole, frac := uint64(p/USD), uint64(p%USD)
	if frac == 0 {
		return strconv.FormatUint(whole, 10)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%012d", whole, frac), "0")
}

// MarshalJSON writes p as a number of dollars (Decimal): what a reader
// of the JSON expects, and exact.
func (p PicoUSD) MarshalJSON() ([]byte, error) { return []byte(p.Decimal()), nil }

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *PicoUSD) UnmarshalJSON(b []byte) error {
	v, err := ParseUSD(string(b))
	*p = v
	return err
}

// Dollars is p in dollars as a float, for /metrics: exact to the cent up
// to tens of millions of dollars.
func (p PicoUSD) Dollars() float64 { return float64(p) / float64(USD) }
