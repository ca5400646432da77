// Package opcases is the earlier home of the op test case tables (shapes, dtypes, edge sizes)
// and their deterministic input generators.
//
// Deprecated: op/optest holds these tables, extended to every op of op.Pass, with one runner
// per op against float64 references; its generators produce the same bits (pinned by
// op/optest's TestGeneratorsMatchOpcases). This copy remains for the tests that still use it.
package opcases
