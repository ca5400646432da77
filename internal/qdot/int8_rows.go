package qdot

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/stratakernels/strata/internal/mem"
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
// codes as Row writes them taken into the panel's order by the assembly transpose (unless
// PackNibbles packed them once, below).
//
// Nibbles, where set, is the same row as 4-bit codes c in [0, 15] with q = c + NibbleOff
// (NibbleOff in [-15, 0]): it writes row n's K/2 bytes into c (element 2m in the low nibble of
// byte m, 2m+1 in the high one, as MLX packs its 4-bit words) and the same scales and offsets
// as Row. The assembly kernels then take the panels in the nibble form of 4-bit MLX weights
// (half the bytes, no widening), the codes corrected by NibbleOff * sum(q_x) in the integer
// sums: bitwise Row's products.
//
// Scales, where set (with Nibbles), writes row n's group scales and offsets alone, the values
// Nibbles writes, without reading the codes. PackNibbles then packs the codes once into the
// kernels' panels; the products read those and take only the scales from Scales per call.
type Int8Rows struct {
	N, K, Group int
	Bias        bool
	Row         func(n int, q []int8, s, b []float32)
	Nibbles     func(n int, c []byte, s, b []float32)
	NibbleOff   int32
	Scales      func(n int, s, b []float32)
	panels      []uint32 // PackNibbles: [ceil(N/32)][K/8][32] code words
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
	if w.Scales != nil && w.Nibbles == nil {
		return fmt.Errorf("%w: Int8Rows weight with Scales but no Nibbles", ErrUnsupported)
	}
	return nil
}

// PackNibbles packs the weight's 4-bit codes once, on up to workers goroutines, into the
// nibble panels the assembly kernels read: K/2 bytes a row for ceil(N/32)*32 rows (the rows
// past N zero), the size of the codes themselves. MatMulInt8's assembly kernels then read the
// panels in place and take only the group scales per call (Scales), where they packed each
// panel from Nibbles before: bitwise the same products. The generic Go kernel still reads
// Row. After it, Nibbles is not called by the assembly kernels, so the owner may let the pages
// it reads go (a mapped file's: they are read again from the file if Row needs them).
// PackNibbles is not safe beside products of the same weight. Errors wrap ErrShape or
// ErrUnsupported (no Nibbles or no Scales).
func (w *Int8Rows) PackNibbles(workers int) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if w.Nibbles == nil || w.Scales == nil {
		return fmt.Errorf("%w: PackNibbles of an Int8Rows weight without Nibbles and Scales", ErrUnsupported)
	}
	src, err := w.int8Source()
	if err != nil {
		return err
	}
	src.panels = nil // pack from Nibbles
	pw := w.K / 8 * panelCols
	panels := mem.Make[uint32](ceilDiv(w.N, panelCols) * pw)
	err = parallelCols(w.N, 1, workers, func(n0, n1 int) error {
		sc := i8ScratchPool.Get().(*i8Scratch)
		defer i8ScratchPool.Put(sc)
		pk := &sc.pk
		pk.src, pk.plan = src, i8plan{nibbles: true}
		defer func() { pk.src, pk.plan = nil, i8plan{} }()
		sc.wsb = grow(sc.wsb, w.K/w.Group*2*panelCols)
		for c0 := n0; c0 < n1; c0 += panelCols {
			pk.pack(panels[c0/panelCols*pw:(c0/panelCols+1)*pw], sc.wsb, c0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.panels = panels
	return nil
}

// PackedBytes is the size of the panels PackNibbles made (0 before it).
func (w *Int8Rows) PackedBytes() int64 { return 4 * int64(len(w.panels)) }

func (w *Int8Rows) int8Source() (*i8src, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	src := &i8src{N: w.N, K: w.K, group: w.Group, bias: w.Bias, signed: true, codes: w.Row}
	if w.Nibbles != nil {
		src.signed, src.nibbles, src.nibRow, src.nibOff = false, true, w.Nibbles, w.NibbleOff
		if w.panels != nil {
			src.panels, src.scales = w.panels, w.Scales
		}
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
