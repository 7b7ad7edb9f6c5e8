// Package monitoring_test checks what monitoring/ ships for Prometheus and
// Grafana: the alert rules pass promtool's check and its unit tests, every
// alert is tested firing and not firing and points to a section of
// docs/troubleshooting.md that exists, and every query of the rules and
// the dashboard parses and reads only metrics and labels that flock's
// /metrics serves, as the collector's golden expositions show them.
package monitoring_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/flockrun/flock/internal/markdown"
	"github.com/flockrun/flock/internal/tier"
)

const (
	rulesFile     = "alerts.yml"
	rulesTestFile = "alerts.test.yml"
	dashboardFile = "dashboard.json"
	// The troubleshooting page, as the repository has it and as runbook
	// URLs name it.
	troubleshooting    = "../docs/troubleshooting.md"
	troubleshootingURL = "https://github.com/flockrun/flock/blob/main/docs/troubleshooting.md"
)

// rules is alerts.yml, as much as the tests read of it.
type rules struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is alerts.test.yml, as much as the tests read of it.
type ruleTests struct {
	Tests []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	tier.RequireNeeds(t, "unit, promtool", tier.Program("promtool", "prometheus"))
	out, err := exec.Command("promtool", args...).CombinedOutput()
	if err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertRules: promtool's own check of the rules (syntax, templates,
// PromQL) and its unit tests of them.
// Tier: unit, promtool (Debian's prometheus).
func TestAlertRules(t *testing.T) {
	promtool(t, "check", "rules", rulesFile)
	promtool(t, "test", "rules", rulesTestFile)
}

// TestEveryAlertTested: each alert has a case where it fires and one where
// it does not, and the tests name no alert the rules lack.
// Tier: unit (no root).
func TestEveryAlertTested(t *testing.T) {
	var rs rules
	var ts ruleTests
	readYAML(t, rulesFile, &rs)
	readYAML(t, rulesTestFile, &ts)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range ts.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range rs.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("alert %s: a case where it fires %v, one where it does not %v; want both in %s", r.Alert, fires[r.Alert], silent[r.Alert], rulesTestFile)
			}
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s tests alert %s, which %s does not have", rulesTestFile, name, rulesFile)
		}
	}
	if len(alerts) == 0 {
		t.Fatalf("no alerts read from %s", rulesFile)
	}
}

// TestRunbooks: every alert has a summary, a description and a
// runbook_url naming a section of docs/troubleshooting.md that exists.
// Tier: unit (no root).
func TestRunbooks(t *testing.T) {
	var rs rules
	readYAML(t, rulesFile, &rs)
	anchors := headingAnchors(t, troubleshooting)
	for _, g := range rs.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: no summary or description", r.Alert)
			}
			u, err := url.Parse(r.Annotations["runbook_url"])
			if err != nil || strings.TrimSuffix(r.Annotations["runbook_url"], "#"+u.Fragment) != troubleshootingURL || !anchors[u.Fragment] {
				t.Errorf("alert %s: runbook_url %q is not %s#<a section of %s>; its sections: %v",
					r.Alert, r.Annotations["runbook_url"], troubleshootingURL, troubleshooting, slices.Sorted(maps.Keys(anchors)))
			}
		}
	}
}

// headingAnchors are the anchors GitHub makes of a Markdown file's
// headings.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return markdown.Anchors(string(b))
}

// query is one PromQL expression and where it is.
type query struct{ where, expr string }

// queries are every expression of the rules and the dashboard, and the
// dashboard's label_values() variable queries (not PromQL: their metric
// is checked, not their syntax).
func queries(t *testing.T) (promql, variables []query) {
	t.Helper()
	var rs rules
	readYAML(t, rulesFile, &rs)
	for _, g := range rs.Groups {
		for _, r := range g.Rules {
			promql = append(promql, query{rulesFile + ": " + r.Alert + r.Record, r.Expr})
		}
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			promql = append(promql, query{dashboardFile + ": " + p.Title, tg.Expr})
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			variables = append(variables, query{dashboardFile + ": variable " + v.Name, v.Definition})
		}
	}
	if len(promql) < 10 {
		t.Fatalf("only %d queries read from %s and %s", len(promql), rulesFile, dashboardFile)
	}
	return promql, variables
}

// grafanaVars are the dashboard's variables, as a query reaches
// Prometheus: $instance is a regular expression, $__rate_interval a
// range.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")

// TestDashboardQueriesParse: every dashboard query, its variables filled
// in as Grafana does, is valid PromQL (promtool parses each as a recording
// rule's expression).
// Tier: unit, promtool.
func TestDashboardQueriesParse(t *testing.T) {
	promql, _ := queries(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, q := range promql {
		if !strings.HasPrefix(q.where, dashboardFile) {
			continue
		}
		n++
		expr, _ := json.Marshal(grafanaVars.Replace(q.expr)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", n, expr)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", path)
}

// prometheusOwn are the series Prometheus makes itself, and the labels it
// gives every target's series.
var (
	prometheusOwn = map[string]bool{"up": true}
	targetLabels  = map[string]bool{"instance": true, "job": true}
)

var (
	// metricRef is a metric's name in a query, with its matchers if any.
	metricRef = regexp.MustCompile(`\b(flock_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	// grouping is by (...), without (...), on (...), ignoring (...),
	// group_left (...), group_right (...).
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// TestQueriesUseRealMetrics: every metric a rule or a dashboard query
// reads is one flock's /metrics serves, as a golden exposition of the
// collector (metrics/testdata) shows it, each label it matches on is one
// that metric has, and each label it groups or joins by is one of its
// metrics' (or a target's: instance, job).
// Tier: unit (no root).
func TestQueriesUseRealMetrics(t *testing.T) {
	families := goldenFamilies(t)
	promql, variables := queries(t)
	for _, q := range append(promql, variables...) {
		refs := metricRef.FindAllStringSubmatch(q.expr, -1)
		if len(refs) == 0 {
			t.Errorf("%s: %q reads no flock metric", q.where, q.expr)
		}
		labelsOfQuery := maps.Clone(targetLabels)
		for _, r := range refs {
			name, selector := r[1], r[2]
			labels, ok := families[name]
			switch {
			case prometheusOwn[name]:
				labels = map[string]bool{}
			case !ok:
				t.Errorf("%s: %s is not a metric flock serves (not in metrics/testdata/*.prom)", q.where, name)
				continue
			}
			for l := range labels {
				labelsOfQuery[l] = true
			}
			for _, m := range matcher.FindAllStringSubmatch(selector, -1) {
				if !labels[m[1]] && !targetLabels[m[1]] {
					t.Errorf("%s: %s has no label %q (it has %v)", q.where, name, m[1], slices.Sorted(maps.Keys(labels)))
				}
			}
		}
		for _, g := range grouping.FindAllStringSubmatch(q.expr, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !labelsOfQuery[l] {
					t.Errorf("%s: groups or joins by %q, which none of its metrics has", q.where, l)
				}
			}
		}
	}
}

// sample is one line of the text exposition: a name and its labels.
var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? `)

// goldenFamilies are the metric names of the collector's golden
// expositions, each with every label it has in any of them.
func goldenFamilies(t *testing.T) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../metrics/testdata/*.prom")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden expositions in ../metrics/testdata: %v", err)
	}
	out := map[string]map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			m := sample.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			if out[m[1]] == nil {
				out[m[1]] = map[string]bool{}
			}
			for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
				out[m[1]][lm[1]] = true
			}
		}
	}
	names := slices.Sorted(maps.Keys(out))
	t.Logf("%d families in the golden expositions: %s", len(names), strings.Join(names, " "))
	return out
}
