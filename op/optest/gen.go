package optest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// Deterministic input generators: a case means the same tensors on every backend and platform
// (PCG and splitmix64 streams, no global state).

// Floats returns n deterministic standard-normal values times scale (PCG seeded by seed).
func Floats(seed uint64, n int, scale float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * scale
	}
	return x
}

// Uniform returns n deterministic values uniform in [lo, hi).
func Uniform(seed uint64, n int, lo, hi float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x0de))
	x := make([]float32, n)
	for i := range x {
		x[i] = lo + (hi-lo)*float32(r.Float64())
	}
	return x
}

// Round16 rounds x to dt (BF16 or F16, round to nearest even) and returns the bits and the
// widened values (what a backend must compute with). For F32 bits is nil and the values are x
// itself. x must be finite.
func Round16(x []float32, dt op.DType) (bits []uint16, widened []float32) {
	switch dt {
	case op.BF16:
		bits = make([]uint16, len(x))
		widened = make([]float32, len(x))
		for i, v := range x {
			u := math.Float32bits(v)
			u += 0x7fff + (u>>16)&1 // finite inputs only: round to nearest even
			bits[i] = uint16(u >> 16)
			widened[i] = math.Float32frombits(uint32(bits[i]) << 16)
		}
	case op.F16:
		bits = make([]uint16, len(x))
		widened = make([]float32, len(x))
		for i, v := range x {
			h := float16.Fromfloat32(v)
			bits[i] = h.Bits()
			widened[i] = h.Float32()
		}
	default:
		return nil, x
	}
	return bits, widened
}

// RandMatrix returns a weight [n, k] of dt (F32, BF16 or F16) holding Floats(seed, n*k, scale)
// rounded to dt, and the widened float32 values every backend must compute with (what the
// references use). Errors wrap op.ErrShape or op.ErrDType.
func RandMatrix(seed uint64, n, k int, dt op.DType, scale float32) (*op.Matrix, []float32, error) {
	bits, wide := Round16(Floats(seed, n*k, scale), dt)
	if dt == op.F32 {
		m, err := op.NewMatrixF32(n, k, wide)
		return m, wide, err
	}
	if dt != op.BF16 && dt != op.F16 {
		return nil, nil, fmt.Errorf("RandMatrix: %w: %v", op.ErrDType, dt)
	}
	m, err := op.NewMatrixU16(n, k, dt, bits)
	return m, wide, err
}

// Tokens returns n deterministic token ids in [0, vocab), with eos inserted at about every
// eosEvery-th position (eosEvery <= 0: never).
func Tokens(seed uint64, n, vocab int, eos int32, eosEvery int) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x70c))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
		if eosEvery > 0 && r.IntN(eosEvery) == 0 {
			ids[i] = eos
		}
	}
	return ids
}

// Slots returns a deterministic slot table rk [T, K] over rows expert-output rows: every row
// used at most once, about one slot in emptyEvery empty (-1; emptyEvery <= 0: none).
// rows must be >= T*K.
func Slots(seed uint64, T, K, rows, emptyEvery int) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x51d))
	perm := r.Perm(rows)
	rk := make([]int32, T*K)
	for i := range rk {
		rk[i] = int32(perm[i])
		if emptyEvery > 0 && r.IntN(emptyEvery) == 0 {
			rk[i] = -1
		}
	}
	return rk
}

// splitmix is splitmix64 (Steele, Lea and Flood 2014): the same stream on every platform. The
// attention and QSA inputs draw from it through fill, the GDN inputs through fillRange.
type splitmix struct{ state uint64 }

func (r *splitmix) next() uint64 {
	r.state += 0x9E3779B97F4A7C15
	z := r.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// fill returns n values uniform in [-amp, amp) from 24 random bits each (exact in float32).
func (r *splitmix) fill(n int, amp float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		u := float32(r.next()>>40) / (1 << 24) // [0, 1), exact in float32
		x[i] = (2*u - 1) * amp
	}
	return x
}

// fillRange returns n values uniform in [lo, hi) from 53 random bits each, rounded to float32.
func (r *splitmix) fillRange(n int, lo, hi float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		u := float64(r.next()>>11) / (1 << 53)
		x[i] = float32(lo + (hi-lo)*u)
	}
	return x
}

// RandQuant returns a deterministic QAffine weight [n, k] of bits-bit codes in groups of group
// inputs with scales and biases in scaleDT (BF16 or F16): uniform codes, scales of either sign
// (about one in eight negative, as MLX's quantizer produces for groups whose largest magnitude is
// negative) around scale / 2^bits, biases around -scale/2, so values are of order scale like
// RandMatrix's. It returns the weight and its dequantized values (Dequant).
func RandQuant(seed uint64, n, k, bits, group int, scaleDT op.DType, scale float32) (*op.Matrix, []float32, error) {
	r := rand.New(rand.NewPCG(seed, 0x9a7))
	words := k * bits / 32
	q := &op.Quant{Bits: bits, Group: group, ScaleDType: scaleDT, Codes: make([]uint32, n*words)}
	for row := 0; row < n; row++ {
		stream := q.Codes[row*words : (row+1)*words]
		for i := 0; i < k; i++ {
			c := uint64(r.IntN(1 << bits))
			for b := 0; b < bits; b++ {
				bit := i*bits + b
				stream[bit/32] |= uint32(c>>b&1) << (bit % 32)
			}
		}
	}
	ng := n * (k / group)
	sc := make([]float32, ng)
	bi := make([]float32, ng)
	for g := range sc {
		s := scale * (0.5 + r.Float32()) * 2 / float32(int(1)<<bits)
		if r.IntN(8) == 0 {
			s = -s
		}
		sc[g], bi[g] = s, -s*float32(int(1)<<bits)/2*(0.8+0.4*r.Float32())
	}
	q.Scales, _ = Round16(sc, scaleDT)
	q.Biases, _ = Round16(bi, scaleDT)
	m := &op.Matrix{N: n, K: k, DType: op.QAffine, Q: q}
	if err := m.Validate("RandQuant"); err != nil {
		return nil, nil, err
	}
	return m, Dequant(m), nil
}
