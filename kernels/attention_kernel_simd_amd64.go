//go:build goexperiment.simd

package kernels

import "simd/archsimd"

// attnSIMD selects the AVX2+FMA attention micro-kernels in builds with GOEXPERIMENT=simd on
// such CPUs. Fused multiply-adds round differently from the portable kernels, so results are
// bitwise reproducible per build and CPU feature set, not across them.
var attnSIMD = archsimd.X86.AVX2() && archsimd.X86.FMA()

// attnKernel names the attention micro-kernels this build runs.
var attnKernel = map[bool]string{true: "avx2-fma-2x4", false: "go-2x4"}[attnSIMD]

func attnScores(st, qt []float32, rp, d int, kr [][]float32) {
	if !attnSIMD {
		attnScoresGo(st, qt, rp, d, kr)
		return
	}
	// Leave no dirty upper YMM state behind: the scalar softmax (and math.Exp) that follows
	// runs legacy SSE code, which otherwise pays a transition or false-dependency penalty.
	defer archsimd.ClearAVXUpperBits()
	nc := len(kr)
	for r := 0; r+1 < rp; r += 2 {
		q0 := qt[r*d : (r+1)*d]
		q1 := qt[(r+1)*d : (r+2)*d]
		c := 0
		for ; c+4 <= nc; c += 4 {
			a00, a01, a02, a03, a10, a11, a12, a13 := attnDot2x4SIMD(q0, q1, kr[c], kr[c+1], kr[c+2], kr[c+3])
			st[c*rp+r], st[c*rp+r+1] = a00, a10
			st[(c+1)*rp+r], st[(c+1)*rp+r+1] = a01, a11
			st[(c+2)*rp+r], st[(c+2)*rp+r+1] = a02, a12
			st[(c+3)*rp+r], st[(c+3)*rp+r+1] = a03, a13
		}
		for ; c < nc; c++ {
			a0, a1 := attnDot2x1SIMD(q0, q1, kr[c])
			st[c*rp+r], st[c*rp+r+1] = a0, a1
		}
	}
}

// attnHsum adds the 8 lanes of x in a fixed tree: (lo + hi), then pairs twice.
func attnHsum(x archsimd.Float32x8) float32 {
	s := x.GetLo().Add(x.GetHi())
	s = s.AddPairs(s)
	s = s.AddPairs(s)
	return s.GetElem(0)
}

// attnDot2x4SIMD: 8 dot products, 8 lanes wide with FMA, reduced by attnHsum, then the
// len%8 tail in scalar order. Each product follows the same steps as in attnDot2x1SIMD.
func attnDot2x4SIMD(q0, q1, k0, k1, k2, k3 []float32) (a00, a01, a02, a03, a10, a11, a12, a13 float32) {
	n := len(q0)
	q1 = q1[:n]
	k0 = k0[:n]
	k1 = k1[:n]
	k2 = k2[:n]
	k3 = k3[:n]
	var s00, s01, s02, s03, s10, s11, s12, s13 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		x0 := archsimd.LoadFloat32x8Slice(q0[i : i+8 : i+8])
		x1 := archsimd.LoadFloat32x8Slice(q1[i : i+8 : i+8])
		y := archsimd.LoadFloat32x8Slice(k0[i : i+8 : i+8])
		s00 = x0.MulAdd(y, s00)
		s10 = x1.MulAdd(y, s10)
		y = archsimd.LoadFloat32x8Slice(k1[i : i+8 : i+8])
		s01 = x0.MulAdd(y, s01)
		s11 = x1.MulAdd(y, s11)
		y = archsimd.LoadFloat32x8Slice(k2[i : i+8 : i+8])
		s02 = x0.MulAdd(y, s02)
		s12 = x1.MulAdd(y, s12)
		y = archsimd.LoadFloat32x8Slice(k3[i : i+8 : i+8])
		s03 = x0.MulAdd(y, s03)
		s13 = x1.MulAdd(y, s13)
	}
	a00, a01, a02, a03 = attnHsum(s00), attnHsum(s01), attnHsum(s02), attnHsum(s03)
	a10, a11, a12, a13 = attnHsum(s10), attnHsum(s11), attnHsum(s12), attnHsum(s13)
	for ; i < n; i++ {
		x0, x1 := q0[i], q1[i]
		a00 += x0 * k0[i]
		a01 += x0 * k1[i]
		a02 += x0 * k2[i]
		a03 += x0 * k3[i]
		a10 += x1 * k0[i]
		a11 += x1 * k1[i]
		a12 += x1 * k2[i]
		a13 += x1 * k3[i]
	}
	return
}

func attnDot2x1SIMD(q0, q1, k0 []float32) (a0, a1 float32) {
	n := len(q0)
	q1 = q1[:n]
	k0 = k0[:n]
	var s0, s1 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		y := archsimd.LoadFloat32x8Slice(k0[i : i+8 : i+8])
		s0 = archsimd.LoadFloat32x8Slice(q0[i:i+8:i+8]).MulAdd(y, s0)
		s1 = archsimd.LoadFloat32x8Slice(q1[i:i+8:i+8]).MulAdd(y, s1)
	}
	a0, a1 = attnHsum(s0), attnHsum(s1)
	for ; i < n; i++ {
		a0 += q0[i] * k0[i]
		a1 += q1[i] * k0[i]
	}
	return
}

// attnPV: for each pair of rows, 2 x 32 output columns stay in eight 8-wide accumulators while
// the block's keys stream past (one broadcast FMA per key and vector); then 8-wide, then scalar
// columns. Every output element sums its keys in index order whatever the tile.
func attnPV(ot, st []float32, rp, d int, vr [][]float32) {
	if !attnSIMD {
		attnPVGo(ot, st, rp, d, vr)
		return
	}
	defer archsimd.ClearAVXUpperBits()
	for r := 0; r+1 < rp; r += 2 {
		o0 := ot[r*d : (r+1)*d]
		o1 := ot[(r+1)*d : (r+2)*d]
		j := 0
		for ; j+32 <= d; j += 32 {
			a0 := archsimd.LoadFloat32x8Slice(o0[j : j+8 : j+8])
			a1 := archsimd.LoadFloat32x8Slice(o0[j+8 : j+16 : j+16])
			a2 := archsimd.LoadFloat32x8Slice(o0[j+16 : j+24 : j+24])
			a3 := archsimd.LoadFloat32x8Slice(o0[j+24 : j+32 : j+32])
			b0 := archsimd.LoadFloat32x8Slice(o1[j : j+8 : j+8])
			b1 := archsimd.LoadFloat32x8Slice(o1[j+8 : j+16 : j+16])
			b2 := archsimd.LoadFloat32x8Slice(o1[j+16 : j+24 : j+24])
			b3 := archsimd.LoadFloat32x8Slice(o1[j+24 : j+32 : j+32])
			for c, vrow := range vr {
				v := vrow[j : j+32 : j+32]
				pp := st[c*rp+r : c*rp+r+2 : c*rp+r+2]
				p0 := archsimd.BroadcastFloat32x8(pp[0])
				p1 := archsimd.BroadcastFloat32x8(pp[1])
				v0 := archsimd.LoadFloat32x8Slice(v[0:8])
				a0 = p0.MulAdd(v0, a0)
				b0 = p1.MulAdd(v0, b0)
				v1 := archsimd.LoadFloat32x8Slice(v[8:16])
				a1 = p0.MulAdd(v1, a1)
				b1 = p1.MulAdd(v1, b1)
				v2 := archsimd.LoadFloat32x8Slice(v[16:24])
				a2 = p0.MulAdd(v2, a2)
				b2 = p1.MulAdd(v2, b2)
				v3 := archsimd.LoadFloat32x8Slice(v[24:32])
				a3 = p0.MulAdd(v3, a3)
				b3 = p1.MulAdd(v3, b3)
			}
			a0.StoreSlice(o0[j : j+8 : j+8])
			a1.StoreSlice(o0[j+8 : j+16 : j+16])
			a2.StoreSlice(o0[j+16 : j+24 : j+24])
			a3.StoreSlice(o0[j+24 : j+32 : j+32])
			b0.StoreSlice(o1[j : j+8 : j+8])
			b1.StoreSlice(o1[j+8 : j+16 : j+16])
			b2.StoreSlice(o1[j+16 : j+24 : j+24])
			b3.StoreSlice(o1[j+24 : j+32 : j+32])
		}
		for ; j+8 <= d; j += 8 {
			a := archsimd.LoadFloat32x8Slice(o0[j : j+8 : j+8])
			b := archsimd.LoadFloat32x8Slice(o1[j : j+8 : j+8])
			for c, vrow := range vr {
				v := archsimd.LoadFloat32x8Slice(vrow[j : j+8 : j+8])
				a = archsimd.BroadcastFloat32x8(st[c*rp+r]).MulAdd(v, a)
				b = archsimd.BroadcastFloat32x8(st[c*rp+r+1]).MulAdd(v, b)
			}
			a.StoreSlice(o0[j : j+8 : j+8])
			b.StoreSlice(o1[j : j+8 : j+8])
		}
		for ; j < d; j++ {
			a, b := o0[j], o1[j]
			for c, vrow := range vr {
				x := vrow[j]
				a += st[c*rp+r] * x
				b += st[c*rp+r+1] * x
			}
			o0[j], o1[j] = a, b
		}
	}
}
