// Package docstest keeps README.md and docs/*.md honest: its tests read
// every shell block of them and check that each mqbroker, mqnamesrv,
// mqadmin, mqbench and mqcontroller command, subcommand and flag shown
// exists in the binaries built from this tree, that every SLUICE_ variable
// and config key shown is one conf knows, and that the configuration
// guide's key tables are the ones conf's key lists generate
// (go test ./cmd/internal/docstest -run TestConfigTables -update rewrites
// them). It has no code outside its tests; it sits under cmd/ because it
// builds and runs the binaries.
package docstest
