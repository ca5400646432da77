package kernels

import (
	"strings"
	"testing"

	"github.com/stratakernels/strata/op/optest"
)

// TestOpCases runs the shared op case table (op/optest) on the CPU backend against its float64
// references: the whole table with the default kernel set; with the other sets (the portable
// Go kernels, and the AVX2 panels where AVX-512 is the default) the whole attention table and
// the Short subset of the other ops. -short runs the Short subset only.
func TestOpCases(t *testing.T) {
	for i, s := range kernelSets() {
		t.Run(s.name, func(t *testing.T) {
			defer s.use()()
			if i == 0 || testing.Short() {
				optest.Run(t, Backend{}, optest.Options{Short: testing.Short()})
				return
			}
			notAttention := func(name string) bool { return !strings.HasPrefix(name, "Attention/") }
			optest.Run(t, Backend{}, optest.Options{Short: true, Filter: notAttention})
			optest.RunAttention(t, Backend{}, optest.Options{})
		})
	}
}
