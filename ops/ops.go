// Package ops holds the operators' files: the Prometheus alert rules
// (alerts.yml), checked by its test against the README's metrics table and
// runbook.
package ops

import (
	_ "embed"
	"regexp"
)

// AlertRules is alerts.yml.
//
//go:embed alerts.yml
var AlertRules []byte

var familyRow = regexp.MustCompile("(?m)^\\| `((?:marketd|asynq)_[a-z0-9_]+)` \\|")

// DocumentedFamilies are the metric families of the README's metrics table
// (rows starting with a marketd_ or asynq_ name), in order.
func DocumentedFamilies(readme []byte) []string {
	var out []string
	for _, m := range familyRow.FindAllSubmatch(readme, -1) {
		out = append(out, string(m[1]))
	}
	return out
}
