package metal

import (
	"math"
	"sync"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/metal/emu"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/x448/float16"
)

var (
	emuOnce sync.Once
	emuDev  mtl.Device
	emuErr  error
)

// testBackend returns a fresh Backend (its own variant record and preferences) on the shared
// emulated device (forward schedule, two threads: the test machines are shared).
func testBackend(t *testing.T) *Backend {
	t.Helper()
	emuOnce.Do(func() { emuDev, emuErr = emu.Open(emu.Options{Threads: 2}) })
	if emuErr != nil {
		t.Fatalf("emulator: %v", emuErr)
	}
	b, err := New(emuDev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// relErr is max |got - want| / max |want| (absolute when want is all zeros).
func relErr(got, want []float32) float64 {
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i])-float64(want[i])))
		m = max(m, math.Abs(float64(want[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

func checkClose(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i, v := range got {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%s[%d] = %v", name, i, v)
		}
	}
	if e := relErr(got, want); e > tol {
		t.Errorf("%s: relative error %.3g > %.3g", name, e, tol)
	} else {
		t.Logf("%s: relative error %.3g (tolerance %.3g)", name, e, tol)
	}
}

func checkBitwise(t *testing.T, name string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d differs: %v vs %v", name, i, a[i], b[i])
		}
	}
}

// rng is splitmix64 mapped to uniform floats.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rng) fill(n int, lo, hi float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(lo + (hi-lo)*float64(r.next()>>11)/(1<<53))
	}
	return x
}

func golden(t *testing.T, file string, names ...string) map[string][]float32 {
	t.Helper()
	f, err := safetensors.Open("../testdata/goldens/" + file)
	if err != nil {
		t.Fatalf("golden %s: %v", file, err)
	}
	out := map[string][]float32{}
	for _, n := range names {
		tn, err := f.Tensor(n)
		if err != nil {
			t.Fatalf("golden %s: %v", n, err)
		}
		if tn.DType == "I32" {
			v, err := tn.Int32()
			if err != nil {
				t.Fatal(err)
			}
			fv := make([]float32, len(v))
			for i, x := range v {
				fv[i] = float32(x)
			}
			out[n] = fv
			continue
		}
		v, err := tn.Float32()
		if err != nil {
			t.Fatalf("golden %s: %v", n, err)
		}
		out[n] = v
	}
	return out
}

func float32bits(v float32) uint32 { return math.Float32bits(v) }

// f16bits rounds v (|v| < 65504, normal or zero) to IEEE half by round-to-nearest-even.
func f16bits(v float32) uint16 {
	return float16.Fromfloat32(v).Bits()
}

func expf64(x float64) float64 { return math.Exp(x) }
