// Package all registers every model family strata runs: import it (for its side effect) where
// configs are parsed. Adding a family is its folder under family/ and one import line here.
package all

import (
	_ "github.com/stratakernels/strata/family/qwen35"    // Qwen3.5 / Qwen3.6
	_ "github.com/stratakernels/strata/family/qwen3next" // Qwen3-Next
	_ "github.com/stratakernels/strata/family/qwen4exp"  // Qwen3.8-Flash-Next
)
