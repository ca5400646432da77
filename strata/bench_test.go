package strata

import (
	"bufio"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/op/optest"
)

// TestWidenBudgetSameLogits loads each tiny checkpoint with every weight widened at load and
// with none, and requires bitwise equal logits (widening is exact; the GEMM blocks are the
// same) and more resident weight bytes widened.
func TestWidenBudgetSameLogits(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			dev, err := Open(Options{Backend: "cpu"})
			if err != nil {
				t.Fatal(err)
			}
			tokens := make([]int32, 70)
			for i := range tokens {
				tokens[i] = int32((i*37 + 11) % 200)
			}
			var ref []float32
			var resident int64
			for _, budget := range []int64{0, -1} {
				m, err := LoadModel(dev, testdata(tm.dir), LoadOptions{WidenBudget: budget})
				if err != nil {
					t.Fatal(err)
				}
				if r := m.Info().ResidentBytes; budget < 0 && r <= resident {
					t.Fatalf("resident weights %d B widened, %d B not: nothing was widened", r, resident)
				} else {
					resident = r
				}
				s, err := m.NewSession(SessionOptions{MaxContext: 128})
				if err != nil {
					t.Fatal(err)
				}
				lg, err := s.Prefill(context.Background(), tokens, PrefillOptions{AllLogits: true})
				m.Close()
				if err != nil {
					t.Fatal(err)
				}
				if ref == nil {
					ref = lg.Data
					continue
				}
				for i := range ref {
					if math.Float32bits(ref[i]) != math.Float32bits(lg.Data[i]) {
						t.Fatalf("logit %d: %g widened, %g not", i, lg.Data[i], ref[i])
					}
				}
			}
		})
	}
}

// benchPeak is the device's GEMM peak P as --bench measures it: optest.BenchPeak (a 2048^3
// float32 MatMul), median of 3 runs after a warm-up.
func benchPeak(b *testing.B, dev *Device) float64 {
	r, err := optest.Time(dev.Ops(), optest.BenchPeak(optest.BenchOptions{}), 3)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("GEMM peak P = %.1f GFLOP/s (%s on %s)", r.GFLOPS(), r.Name, dev.Backend())
	return r.GFLOPS()
}

// vmHWM is the process's peak resident set in bytes (Linux /proc/self/status), 0 elsewhere.
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sliceModelDir generates the qwen4exp-slice checkpoint (3.2 GB of bf16) into the user cache
// directory on first use, or into STRATA_SLICE_DIR when set.
func sliceModelDir(b *testing.B) string {
	dir := os.Getenv("STRATA_SLICE_DIR")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "strata", "models", "qwen4exp-slice-v2")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir
	}
	b.Logf("generating qwen4exp-slice into %s", dir)
	if err := modelgen.Generate(dir, modelgen.Presets["qwen4exp-slice"]); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkSlice prefills T = 512 and 2048 random tokens through a 4-layer slice of
// Qwen3.8-Flash-Next at real width (3 GDN + 1 QSA layers, 64 experts, top-10), bf16 weights as
// stored (STRATA_WIDEN_BUDGET bytes of float32 copies, default 0, as LoadOptions). It reports tokens/s,
// GFLOP/s (PrefillFLOPs total), the fraction of the measured GEMM peak P, the fraction of the
// GEMM-bound limit (the time the model's GEMM flops take at P, over the measured time) and the
// peak resident set. Run it alone:
//
//	go test ./strata -run '^$' -bench Slice -benchtime 1x
func BenchmarkSlice(b *testing.B) {
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		b.Fatal(err)
	}
	P := benchPeak(b, dev)
	budget := int64(0)
	if v := os.Getenv("STRATA_WIDEN_BUDGET"); v != "" {
		if budget, err = strconv.ParseInt(v, 10, 64); err != nil {
			b.Fatal(err)
		}
	}
	m, err := LoadModel(dev, sliceModelDir(b), LoadOptions{WidenBudget: budget})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, T := range []int{512, 2048} {
		b.Run("T"+strconv.Itoa(T), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, uint64(T)))
			tokens := make([]int32, T)
			for i := range tokens {
				tokens[i] = int32(r.IntN(m.Vocab()))
			}
			var busy time.Duration
			var st Stats
			for b.Loop() {
				s, err := m.NewSession(SessionOptions{MaxContext: T})
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				lg, err := s.Prefill(context.Background(), tokens, PrefillOptions{})
				busy += time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				st = lg.Stats
				s.Close()
			}
			gemm, total := m.PrefillFLOPs(0, T, 1)
			sec := busy.Seconds() / float64(b.N)
			b.ReportMetric(float64(T)/sec, "tokens/s")
			b.ReportMetric(total/sec/1e9, "GFLOP/s")
			b.ReportMetric(total/sec/1e9/P, "frac-of-P")
			b.ReportMetric(gemm/(P*1e9)/sec, "frac-of-GEMM-bound")
			b.ReportMetric(float64(vmHWM())/(1<<20), "peak-RSS-MiB")
			for i, d := range st.Stage {
				b.Logf("T=%d %-14s %8.1f ms", T, Stage(i), float64(d.Microseconds())/1000)
			}
		})
	}
}
