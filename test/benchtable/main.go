// Command benchtable turns the output of make bench's go test runs into
// its one table. It reads the output on stdin, copies every line but the
// rows to stderr as it comes (the run's progress and any failure), and at
// the end prints on stdout the table, aligned, then the same as Markdown
// for docs/benchmarks.md. Each figure is the median of its row's values with their
// spread (min–max); the ratio is flock's median over the floor's.
//
//	go test -run '^$' -bench . -benchtime 1x ./bus/ ./test/ 2>&1 | go run ./test/benchtable
//
// It exits 1 when go test reported a failure (the table then has what was
// measured before it) or when there is no row at all.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flockrun/flock/test/benchrow"
)

func main() {
	res, err := read(os.Stdin, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	t := res.table()
	fmt.Println()
	fmt.Println(header())
	fmt.Println()
	fmt.Print(t.text())
	fmt.Println()
	fmt.Print(t.markdown())
	switch {
	case res.failed:
		fmt.Fprintln(os.Stderr, "benchtable: go test reported a failure (above); the table has what was measured before it")
		os.Exit(1)
	case len(res.rows) == 0:
		fmt.Fprintln(os.Stderr, "benchtable: no BENCHROW line in the input")
		os.Exit(1)
	}
}

// result is what the go test output said.
type result struct {
	rows    []benchrow.Row
	skipped []string // "BenchmarkX: why"
	failed  bool
}

func read(in io.Reader, echo io.Writer) (result, error) {
	var res result
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20) // rows of per-agent figures are long
	skipAt := -1                           // index in res.skipped waiting for its reason
	for sc.Scan() {
		line := sc.Text()
		r, isRow, err := benchrow.Parse(line)
		if err != nil {
			return res, err
		}
		if isRow {
			res.rows = append(res.rows, r)
			continue
		}
		fmt.Fprintln(echo, line)
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "--- SKIP: "):
			res.skipped = append(res.skipped, strings.Fields(strings.TrimPrefix(trimmed, "--- SKIP: "))[0])
			skipAt = len(res.skipped) - 1
			continue
		case skipAt >= 0 && trimmed != "" && strings.HasPrefix(line, " "):
			res.skipped[skipAt] += ": " + trimmed
		case strings.HasPrefix(line, "FAIL"), strings.HasPrefix(trimmed, "--- FAIL"), strings.HasPrefix(line, "panic:"):
			res.failed = true
		}
		skipAt = -1
	}
	return res, sc.Err()
}

// table is the rows as cells, footnotes apart.
type table struct {
	cells   [][]string
	notes   []string
	skipped []string
}

var columns = []string{"measured", "floor", "N", "reps", "unit", "flock: median (min–max)", "floor: median (min–max)", "flock/floor", "goal"}

func (res result) table() table {
	rows := slices.Clone(res.rows)
	// The last of a row printed twice wins (a benchmark run again).
	seen := map[string]int{}
	var uniq []benchrow.Row
	for _, r := range rows {
		k := fmt.Sprintf("%s\x00%s\x00%d", r.Group, r.What, r.N)
		if i, ok := seen[k]; ok {
			uniq[i] = r
			continue
		}
		seen[k] = len(uniq)
		uniq = append(uniq, r)
	}
	slices.SortStableFunc(uniq, func(a, b benchrow.Row) int {
		if d := groupRank(a.Group) - groupRank(b.Group); d != 0 {
			return d
		}
		return 0 // as printed: each benchmark orders its own rows
	})
	t := table{skipped: res.skipped}
	for _, r := range uniq {
		floor := r.Floor
		if r.Note != "" {
			i := slices.Index(t.notes, r.Note)
			if i < 0 {
				t.notes = append(t.notes, r.Note)
				i = len(t.notes) - 1
			}
			floor = strings.TrimSpace(fmt.Sprintf("%s [%d]", floor, i+1))
		}
		if floor == "" {
			floor = "—"
		}
		n := "—"
		if r.N > 0 {
			n = strconv.Itoa(r.N)
		}
		unit := r.Unit
		if r.Higher {
			unit += " ↑"
		}
		ratio, base := "—", "—"
		if len(r.Base) > 0 {
			base = summary(r.Base)
			if m := median(r.Base); m != 0 {
				ratio = num(median(r.Flock)/m) + "x"
			}
		}
		goal := r.Goal
		if goal == "" {
			goal = "—"
		}
		t.cells = append(t.cells, []string{r.What, floor, n, strconv.Itoa(len(r.Flock)), unit, summary(r.Flock), base, ratio, goal})
	}
	return t
}

func groupRank(g string) int {
	if i := slices.Index(benchrow.Groups, g); i >= 0 {
		return i
	}
	return len(benchrow.Groups)
}

func (t table) text() string {
	width := make([]int, len(columns))
	for _, row := range append([][]string{columns}, t.cells...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(row []string) {
		for i, c := range row {
			pad := width[i] - len([]rune(c))
			if rightAligned(i) {
				b.WriteString(strings.Repeat(" ", pad) + c)
			} else {
				b.WriteString(c + strings.Repeat(" ", pad))
			}
			if i < len(row)-1 {
				b.WriteString("  ")
			}
		}
		trimmed := strings.TrimRight(b.String(), " ")
		b.Reset()
		b.WriteString(trimmed + "\n")
	}
	line(columns)
	rule := make([]string, len(columns))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	line(rule)
	for _, row := range t.cells {
		line(row)
	}
	b.WriteString(t.footer())
	return b.String()
}

func (t table) markdown() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n|")
	for i := range columns {
		if rightAligned(i) {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, row := range t.cells {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	// The footer's lines as a list, so Markdown keeps them apart.
	b.WriteString("\n")
	for _, l := range strings.Split(strings.TrimSpace(t.footer()), "\n") {
		b.WriteString("- " + l + "\n")
	}
	return b.String()
}

// rightAligned are the columns of figures: N, reps and the three results.
func rightAligned(col int) bool { return col == 2 || col == 3 || (col >= 5 && col <= 7) }

// footer is the footnotes and what was skipped. Ratios are of medians; ↑
// marks a figure where more is better, so there a ratio under 1 is flock
// being slower.
func (t table) footer() string {
	var b strings.Builder
	b.WriteString("\nRatios are flock's median over the floor's; ↑: more is better. reps: repetitions (for per-agent figures, agents).\n")
	for i, n := range t.notes {
		fmt.Fprintf(&b, "[%d] %s\n", i+1, n)
	}
	for _, s := range t.skipped {
		fmt.Fprintf(&b, "skipped: %s\n", s)
	}
	return b.String()
}

func header() string {
	form := "full"
	if os.Getenv(benchrow.QuickEnv) == "1" {
		form = "QUICK (short form: not the full table)"
	}
	return fmt.Sprintf("flock make bench, %s, %s; machine: %s", time.Now().UTC().Format("2006-01-02 15:04 UTC"), form, machine())
}

// machine is the host the run was on: CPU model, cores, memory, kernel.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s, %d cores%s%s", model, runtime.NumCPU(), mem, kernel)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summary is "median (min–max)", or the one figure alone.
func summary(v []float64) string {
	if len(v) == 1 {
		return num(v[0])
	}
	return fmt.Sprintf("%s (%s–%s)", num(median(v)), num(slices.Min(v)), num(slices.Max(v)))
}

// num prints about three significant digits, never an exponent.
func num(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 10000:
		return num(v/1000) + "k"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}
