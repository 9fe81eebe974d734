// Package cli holds what Sluice's binaries share to talk to their users.
package cli

import "strings"

// OneLine joins the lines of a (possibly joined) error with "; ", so that
// every failure is reported on one line.
func OneLine(err error) string {
	var parts []string
	for line := range strings.SplitSeq(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "; "), ":; ", ": ")
}
