package metal

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
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

// backendOn returns a Backend on an emulator opened with opts, closed when the test ends.
func backendOn(t *testing.T, opts emu.Options) (*Backend, *emu.Device) {
	t.Helper()
	dev, err := emu.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	b, err := New(dev)
	if err != nil {
		t.Fatal(err)
	}
	return b, dev.(*emu.Device)
}

// exec runs ops over host tensors in one Pass of b (op.Exec), failing the test on error.
func exec(t *testing.T, b *Backend, run func(op.Pass) error, args ...any) {
	t.Helper()
	if _, err := op.Exec(b, run, args...); err != nil {
		t.Fatal(err)
	}
}

// The ops the golden, schedule and variant tests call, over host slices (op.Exec).
var f32, i32 = op.HostF32, op.HostI32

func attention(t *testing.T, b *Backend, o, lse, q, k, v []float32, p op.AttnParams, sel *op.Selection) {
	t.Helper()
	a := op.Attention{O: f32(o), Q: f32(q), K: f32(k), V: f32(v), P: p}
	if lse != nil {
		a.LSE = f32(lse)
	}
	if sel != nil {
		a.Sel, a.Tok = sel, i32(sel.Tokens)
	}
	exec(t, b, func(p op.Pass) error { return p.Attention(a) }, &a)
}

func gdnScan(t *testing.T, b *Backend, o, state, q, k, v, g, beta []float32, p op.GDNParams) {
	t.Helper()
	a := op.GDNScan{O: f32(o), State: f32(state), Q: f32(q), K: f32(k), V: f32(v), G: f32(g), Beta: f32(beta), P: p}
	exec(t, b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
}

// normQK l2-normalises q and k per head in place, q also scaled by Dk^-0.5 (what GDNPre leaves
// for the scan), with optest's float64 reference rounded once.
func normQK(q, k []float32, Dk int) {
	for _, x := range []struct {
		v     []float32
		scale float64
	}{{q, 1 / math.Sqrt(float64(Dk))}, {k, 1}} {
		for i, y := range optest.RefL2Norm(optest.To64(x.v), Dk, x.scale) {
			x.v[i] = float32(y)
		}
	}
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

// checkClose64 is checkClose against a float64 reference.
func checkClose64(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if e := optest.RelErr(got, want); !(e <= tol) {
		t.Errorf("%s: relative error %.3g > %.3g", name, e, tol)
	} else {
		t.Logf("%s: relative error %.3g (tolerance %.3g)", name, e, tol)
	}
}

func checkBitwise(t *testing.T, name string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values vs %d", name, len(a), len(b))
	}
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

// randomSelection is a QSA-style selection for T rows at pos0..: every third row dense, the
// others a random ascending subset of 0..pos0+t that keeps the diagonal.
func randomSelection(r *rng, T, pos0 int) *op.Selection {
	s := &op.Selection{T: T, Dense: make([]bool, T), Offsets: make([]int32, T+1)}
	for t := 0; t < T; t++ {
		s.Offsets[t] = int32(len(s.Tokens))
		if t%3 == 0 {
			s.Dense[t] = true
		} else {
			for pos := 0; pos <= pos0+t; pos++ {
				if pos == pos0+t || r.next()%3 == 0 {
					s.Tokens = append(s.Tokens, int32(pos))
				}
			}
		}
		s.Offsets[t+1] = int32(len(s.Tokens))
	}
	return s
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

// checkVariant requires that a kernel variant whose name starts with prefix ran on b.
func checkVariant(t *testing.T, b *Backend, prefix string) {
	t.Helper()
	for _, v := range b.Variants() {
		if strings.HasPrefix(v, prefix) {
			return
		}
	}
	t.Errorf("no variant %s* ran: %v", prefix, b.Variants())
}
