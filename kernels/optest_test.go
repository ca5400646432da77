package kernels

import (
	"strings"
	"testing"
	"time"

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

// TestTimeBenchCases runs the GEMM peak and every benchmark case at a few tokens (the real
// widths) through optest.Time on the CPU backend, then a case of the test table by its name: each
// must run and report ordered, positive times and its work count. -short leaves out the two
// MoEExperts cases (2 GB of expert weights, 12 s to generate).
func TestTimeBenchCases(t *testing.T) {
	o := optest.BenchOptions{T: 3, LongT: 5, Pos0: 40}
	cs := append([]optest.Case{optest.BenchPeak(o)}, optest.BenchCases(o)...)
	for _, c := range optest.Cases() {
		if c.Name == "MatMul/T65_N97_K130_BF16" {
			cs = append(cs, c)
		}
	}
	if n := len(optest.BenchCases(o)) + 2; len(cs) != n {
		t.Fatalf("%d cases, want %d (is MatMul/T65_N97_K130_BF16 in optest.Cases?)", len(cs), n)
	}
	names := map[string]bool{}
	for _, c := range cs {
		if testing.Short() && strings.HasPrefix(c.Name, "MoEExperts/") {
			continue
		}
		t0 := time.Now()
		r, err := optest.Time(Backend{}, c, 3)
		if err != nil {
			t.Fatal(err)
		}
		if names[c.Name] {
			t.Errorf("%s: listed twice", c.Name)
		}
		names[c.Name] = true
		if r.Name != c.Name || r.Reps != 3 || r.Min <= 0 || r.Min > r.Median || r.Device <= 0 || r.Flops != c.Flops || r.Bytes != c.Bytes {
			t.Errorf("%s: %+v", c.Name, r)
		}
		t.Logf("%-70s %9.3f ms  %7.2f GFLOP/s %7.2f GB/s (set up and run in %v)", c.Name, float64(r.Median.Microseconds())/1000, r.GFLOPS(), r.GBPS(),
			time.Since(t0).Round(time.Millisecond))
	}
}
