package qdot

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// Int8Rows is a weight [N, K] that its owner decodes row by row into signed int8 codes with a
// float32 scale and, with Bias, a float32 offset per group of Group elements: W[n, k] =
// s[k/Group] * q[k] + b[k/Group] (in the int8 arithmetic of the package documentation, b is the
// bias b_g). Row writes row n's codes in natural order into q (len K), its group scales into s
// and (Bias) its group offsets into b (len K/Group); it is called from several goroutines at
// once and must give the same values for a row every time. This is how
// the GGUF block types (package kernels) reach the int8 kernels: each type's codes, sub-block
// scales and mins become int8 codes with a scale (and an offset) per 32 elements. The weight is
// not copied: with the assembly kernels its panels are packed from Row on every call, the
// codes as Row writes them taken into the panel's order by the assembly transpose.
//
// Nibbles, where set, is the same row as 4-bit codes c in [0, 15] with q = c + NibbleOff
// (NibbleOff in [-15, 0]): it writes row n's K/2 bytes into c (element 2m in the low nibble of
// byte m, 2m+1 in the high one, as MLX packs its 4-bit words) and the same scales and offsets
// as Row. The assembly kernels then take the panels in the nibble form of 4-bit MLX weights
// (half the bytes, no widening), the codes corrected by NibbleOff * sum(q_x) in the integer
// sums: bitwise Row's products.
type Int8Rows struct {
	N, K, Group int
	Bias        bool
	Row         func(n int, q []int8, s, b []float32)
	Nibbles     func(n int, c []byte, s, b []float32)
	NibbleOff   int32
}

// Int8RowsGroups are the group sizes an Int8Rows weight may have: multiples of the activation
// blocks QuantizeInt8 takes.
var Int8RowsGroups = []int{32, 64, 128}

// Validate checks the weight's sizes. Errors wrap ErrShape or ErrUnsupported.
func (w *Int8Rows) Validate() error {
	if w == nil || w.Row == nil {
		return fmt.Errorf("%w: Int8Rows weight without its rows", ErrShape)
	}
	if !slices.Contains(Int8RowsGroups, w.Group) {
		return fmt.Errorf("%w: Int8Rows weight in groups of %d (want one of %v)", ErrUnsupported, w.Group, Int8RowsGroups)
	}
	if w.N <= 0 || w.K <= 0 || w.K%w.Group != 0 || w.N > math.MaxInt32 || w.K > math.MaxInt32 {
		return fmt.Errorf("%w: Int8Rows weight [%d, %d] in groups of %d", ErrShape, w.N, w.K, w.Group)
	}
	if w.NibbleOff < -15 || w.NibbleOff > 0 || w.NibbleOff != 0 && w.Nibbles == nil {
		return fmt.Errorf("%w: Int8Rows weight with NibbleOff %d (want [-15, 0], with Nibbles)", ErrUnsupported, w.NibbleOff)
	}
	return nil
}

func (w *Int8Rows) int8Source() (*i8src, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	src := &i8src{N: w.N, K: w.K, group: w.Group, bias: w.Bias, signed: true, codes: w.Row}
	if w.Nibbles != nil {
		src.signed, src.nibbles, src.nibRow, src.nibOff = false, true, w.Nibbles, w.NibbleOff
	}
	src.row = func(n int, q []int32, s, b []float32) {
		// The codes into q's first K bytes, then widened in place from the last (code k's byte
		// lies at or before its int32).
		c := unsafe.Slice((*int8)(unsafe.Pointer(&q[0])), w.K)
		w.Row(n, c, s, b)
		for k := w.K - 1; k >= 0; k-- {
			q[k] = int32(c[k])
		}
	}
	return src, nil
}
