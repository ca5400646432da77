package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/qdot"
	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// TestGGMLDecode: every kernel set decodes every GGML block type bitwise as optest.DequantGGML
// (ggml's values), on the generated weights and on blocks of random bytes (half scales that are
// subnormal, huge, infinite or NaN; every code and sub-block scale; MXFP4 exponents 0 to 255),
// all rows, a run of rows and a single row; the kernels line names the set that ran.
func TestGGMLDecode(t *testing.T) {
	forEachKernel(t, func(t *testing.T) {
		want := map[bool]string{false: "generic Go", true: "avx2/Go unpacking, avx2 scaling"}[useAsm]
		if useAsm && useAsm512 {
			want = "avx2/Go unpacking, avx512 scaling"
		}
		if GGMLKernel() != want || !strings.Contains(Backend{}.Kernels(), "GGML dequantization "+want) {
			t.Fatalf("GGMLKernel %q, Kernels %q, want %q", GGMLKernel(), Backend{}.Kernels(), want)
		}
		for _, gt := range op.GGMLBlockTypes {
			t.Run(gt.String(), func(t *testing.T) {
				m, want, err := optest.RandGGML(uint64(gt), 7, 512, gt, 0.1)
				if err != nil {
					t.Fatal(err)
				}
				checkDecode(t, m, want)
				r := rand.New(rand.NewPCG(uint64(gt), 1))
				raw := make([]byte, len(m.GG.Data))
				for i := range raw {
					raw[i] = byte(r.UintN(256))
				}
				rm, err := op.NewMatrixGGML(7, 512, &op.GGMLBlocks{Type: gt, Data: raw})
				if err != nil {
					t.Fatal(err)
				}
				checkDecode(t, rm, optest.DequantGGML(rm))
			})
		}
	})
}

// BenchmarkGGMLDecode times the decoding of a [64, 4096] weight of each type (the kernel set
// the CPU runs by default), in elements per nanosecond through b.SetBytes(elements).
func BenchmarkGGMLDecode(b *testing.B) {
	const N, K = 64, 4096
	dst := make([]float32, N*K)
	for _, gt := range op.GGMLBlockTypes {
		m, _, err := optest.RandGGML(1, N, K, gt, 0.1)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(gt.String(), func(b *testing.B) {
			b.SetBytes(N * K)
			for b.Loop() {
				unpackRows(dst, m, 0, N, nil)
			}
		})
	}
}

// TestGGMLInt8Row: the int8 form of every GGML type (every kernel set) holds ggml's values: q * s + b, computed
// in float64 and rounded once, is optest.DequantGGML's value (zeros of either sign alike) for
// the types whose scales and mins are per 32 or per block (ggml_int8.go), within half the
// group's scale of it for Q2_K (requantized groups) and Q6_K (folded; one scale where a +128 was
// clamped, as for Q3_K). Q2_K, Q3_K and Q6_K also with every sub-scale of a block alike, the
// groups their int8 form keeps as they are.
func TestGGMLInt8Row(t *testing.T) {
	const N, K = 6, 512
	same := map[op.GGMLType]func(blk []byte){
		op.GGMLQ2_K: func(blk []byte) {
			for i := range 16 {
				blk[i] = 0x37
			}
		},
		op.GGMLQ3_K: func(blk []byte) {
			for i := 96; i < 104; i++ {
				blk[i] = 0xaa
			}
			for i := 104; i < 108; i++ {
				blk[i] = 0x55
			}
		},
		op.GGMLQ6_K: func(blk []byte) {
			for i := 192; i < 208; i++ {
				blk[i] = 0xf9
			}
		},
	}
	types := slices.Clone(op.GGMLBlockTypes)
	for gt := range same {
		types = append(types, gt+1000) // the type with its sub-scales alike
	}
	for _, gt := range types {
		alike := same[gt-1000]
		if alike != nil {
			gt -= 1000
		}
		m, want, err := optest.RandGGML(uint64(40+gt), N, K, gt, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		if alike != nil {
			ts := gt.TypeSize()
			for i := 0; i < len(m.GG.Data); i += ts {
				alike(m.GG.Data[i : i+ts])
			}
			want = optest.DequantGGML(m)
		}
		w := ggmlInt8(m)
		exact := gt != op.GGMLQ2_K && gt != op.GGMLQ3_K && gt != op.GGMLQ6_K
		q, s, b := make([]int8, K), make([]float32, K/32), make([]float32, K/32)
		requant := 0
		forEachKernel(t, func(t *testing.T) {
			requant = 0
			for n := range N {
				w.Row(n, q, s, b)
				for k, c := range q {
					v := float64(c)*float64(s[k/32]) + float64(b[k/32])
					ref := want[n*K+k]
					if exact && float32(v) != ref { // -0 and +0 alike: the int8 sums do not see the sign of a zero
						t.Fatalf("%v row %d element %d: %d * %g + %g = %g, want %g", gt, n, k, c, s[k/32], b[k/32], v, ref)
					}
					bound := 0.5001 // Q2_K's requantized groups; Q3_K and Q6_K's clamped +128 is off by one
					if gt == op.GGMLQ3_K || gt == op.GGMLQ6_K {
						bound = 1.0001
					}
					if d := math.Abs(v - float64(ref)); d > bound*math.Abs(float64(s[k/32]))+1e-7*math.Abs(float64(ref)) {
						t.Fatalf("%v row %d element %d: %g, want %g (scale %g)", gt, n, k, v, ref, s[k/32])
					}
					if d := math.Abs(v - float64(ref)); d > 1e-6*math.Abs(float64(ref)) && k%32 == 0 {
						requant++
					}
				}
			}
		})
		if !w.Bias && ggmlHasMin(gt) || w.Bias && !ggmlHasMin(gt) {
			t.Errorf("%v: Bias %v", gt, w.Bias)
		}
		t.Logf("%v: %d of %d groups with an inexact first element", gt, requant, N*K/32)
	}
}

// BenchmarkGGMLMatMul runs y = x W^T in f32 and int8 compute for GGML weights beside MLX 4-bit
// (groups of 64) at a projection's and two experts' shapes, in GFLOP/s (compare within one run).
func BenchmarkGGMLMatMul(b *testing.B) {
	shapes := []struct {
		name    string
		T, N, K int
	}{
		{"proj_T512_N2560_K2560", 512, 2560, 2560},
		{"expert_gateup_T80_N1280_K2560", 80, 1280, 2560},
		{"expert_gateup_T16_N1024_K2048", 16, 1024, 2048}, // 256 experts top-8 at T = 512
		{"expert_gateup_T64_N1024_K2048", 64, 1024, 2048}, // and at T = 2048
		// Qwen3.5-35B-A3B in steps of 1024: a GDN projection and the shared expert's gate.
		{"proj_T1024_N8192_K2048", 1024, 8192, 2048},
		{"shared_gate_T1024_N512_K2048", 1024, 512, 2048},
	}
	for _, s := range shapes {
		mlx, _, _ := optest.RandQuant(1, s.N, s.K, 4, 64, op.BF16, 0.05)
		ws := []*op.Matrix{mlx}
		for _, gt := range []op.GGMLType{op.GGMLQ4_K, op.GGMLIQ4_XS, op.GGMLQ4_0, op.GGMLQ6_K, op.GGMLQ8_0} {
			m, _, err := optest.RandGGML(uint64(gt), s.N, s.K, gt, 0.05)
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, m)
		}
		x := optest.Floats(5, s.T*s.K, 1)
		y := make([]float32, s.T*s.N)
		for _, mode := range []op.ComputeMode{op.ComputeF32, op.ComputeInt8} {
			store := Backend{}.NewWeights(op.WeightOptions{Compute: mode})
			for _, w := range ws {
				p, err := store.Prepare(w)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprintf("%s/%v/%s", s.name, mode, weightFormat(w)), func(b *testing.B) {
					for b.Loop() {
						if err := matMulChecked(y, x, s.T, p); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(s.T)*float64(s.N)*float64(s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestGGMLInt8Resident: in int8 mode a GGML weight, and an MLX 4-bit one, keep only their data
// as stored (their forms add no bytes: ResidentBytes of a 4-bit file stays the file's size),
// but for Q4_0, Q4_1 and Q4_K, whose packed form (which the products read in place of the data)
// is the data's size; the report names the GGML route, its kernel and the packed bytes.
func TestGGMLInt8Resident(t *testing.T) {
	const N, K = 512, 2560
	store := Backend{}.NewWeights(op.WeightOptions{Compute: op.ComputeInt8})
	var packed int64
	for _, gt := range []op.GGMLType{op.GGMLQ4_K, op.GGMLIQ4_XS, op.GGMLQ4_0, op.GGMLQ4_1, op.GGMLMXFP4} {
		m, _, err := optest.RandGGML(uint64(gt), N, K, gt, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		p, err := store.Prepare(m)
		if err != nil {
			t.Fatal(err)
		}
		file := int64(N * K / gt.BlockSize() * gt.TypeSize())
		if p.Compute == nil || p.Bytes() != m.Bytes() || m.Bytes() != file {
			t.Fatalf("%v: form %v, %d bytes of data, file %d", gt, p.Compute, p.Bytes(), file)
		}
		resident := p.Bytes()
		switch gt {
		case op.GGMLQ4_0, op.GGMLQ4_1, op.GGMLQ4_K:
			if qdot.BestInt8() == qdot.Go {
				break // the generic kernel reads Row: nothing is packed (a purego build)
			}
			if !p.Compute.Packed() || p.Compute.Bytes() != file {
				t.Fatalf("%v: form packed %v with %d bytes, want the file's %d", gt, p.Compute.Packed(), p.Compute.Bytes(), file)
			}
			resident = p.Compute.Bytes()
			packed += resident
		default:
			if p.Compute.Packed() || p.Compute.Bytes() != 0 {
				t.Fatalf("%v: form packed %v with %d bytes, want none", gt, p.Compute.Packed(), p.Compute.Bytes())
			}
		}
		t.Logf("%v: %.3f bytes an element resident in int8 mode (%.2f bits), 1.00x the stored blocks", gt,
			float64(resident)/(N*K), 8*float64(resident)/(N*K))
	}
	mlx, _, _ := optest.RandQuant(1, N, K, 4, 64, op.BF16, 0.05)
	p, err := store.Prepare(mlx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Compute == nil || p.Compute.Packed() || p.Compute.Bytes() != 0 || p.Bytes() != mlx.Bytes() {
		t.Fatalf("MLX 4-bit: form %v, %d + %d bytes resident, stored %d", p.Compute, p.Bytes(), p.Compute.Bytes(), mlx.Bytes())
	}
	if store.Bytes() != 0 {
		t.Errorf("the int8 store holds %d bytes of float32 copies", store.Bytes())
	}
	want := fmt.Sprintf("packed at load into panels of their size, %.1f MiB", float64(packed)/(1<<20))
	if qdot.BestInt8() == qdot.Go {
		want = "weights read as stored"
	}
	if r := store.Compute(); !strings.Contains(r, "for GGML Q4_K: 1") || !strings.Contains(r, "weights read as stored") || !strings.Contains(r, want) {
		t.Errorf("report %q, want %q in it", r, want)
	}
}

// TestQ4KScales: the assembly decode of Q4_K block heads (q4KScalesAVX2) is bitwise the Go
// loop's, for heads of random bytes at the strides of the heads alone and of whole blocks, and
// for every float16 value as d and as dmin (subnormals, Inf and NaN included) beside random
// scale bytes.
func TestQ4KScales(t *testing.T) {
	if !hasFPAsm {
		t.Skip("no assembly decoding kernels on this CPU")
	}
	check := func(h []byte, stride, nb int, what string) {
		t.Helper()
		K := 256 * nb
		want, wantB := make([]float32, K/32), make([]float32, K/32)
		got, gotB := make([]float32, K/32+1), make([]float32, K/32+1)
		got[K/32], gotB[K/32] = 7, 7 // past the last group: left alone
		func() {
			defer kernelSet{"go", false, false}.use()()
			nibbleScales(op.GGMLQ4_K, h, stride, K, want, wantB)
		}()
		func() {
			defer kernelSet{"asm", true, false}.use()()
			nibbleScales(op.GGMLQ4_K, h, stride, K, got[:K/32], gotB[:K/32])
		}()
		for g := range K / 32 {
			if math.Float32bits(got[g]) != math.Float32bits(want[g]) || math.Float32bits(gotB[g]) != math.Float32bits(wantB[g]) {
				t.Fatalf("%s, stride %d, %d blocks, group %d: assembly %g, %g; Go %g, %g", what, stride, nb, g, got[g], gotB[g], want[g], wantB[g])
			}
		}
		if got[K/32] != 7 || gotB[K/32] != 7 {
			t.Fatalf("%s: written past the last group", what)
		}
	}
	r := rand.New(rand.NewPCG(9, 9))
	for _, stride := range []int{16, 144} {
		for _, nb := range []int{1, 2, 8, 11} {
			h := make([]byte, nb*stride)
			for i := range h {
				h[i] = byte(r.Uint32())
			}
			check(h, stride, nb, "random bytes")
		}
	}
	// Every float16 as d (bytes 0-1) and as dmin (bytes 2-3), 8 heads a call.
	h := make([]byte, 8*16)
	for v := 0; v < 1<<16; v += 8 {
		for i := range h {
			h[i] = byte(r.Uint32())
		}
		for b := range 8 {
			binary.LittleEndian.PutUint16(h[16*b:], uint16(v+b))
			binary.LittleEndian.PutUint16(h[16*b+2:], uint16(r.Uint32()))
		}
		check(h, 16, 8, "every d")
		for b := range 8 {
			binary.LittleEndian.PutUint16(h[16*b:], uint16(r.Uint32()))
			binary.LittleEndian.PutUint16(h[16*b+2:], uint16(v+b))
		}
		check(h, 16, 8, "every dmin")
	}
}

// TestQ6Fold: the int8 form of Q6_K blocks (q6KInt8, in every kernel set) is bitwise the
// float64 reference of the fold ggml_int8.go describes, for every pair of sub-scales (each
// pair with random codes in 8 blocks) and block scales of either sign, zero and NaN.
func TestQ6Fold(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 60))
	var blocks [][]byte
	ds := []uint16{0x3c00, 0xbc00, 0x1234, 0x0000, 0x8000, 0x7e00}
	for p := 0; p < 65536*8; p += 8 {
		b := make([]byte, 210)
		for i := range 192 {
			b[i] = byte(r.Uint32())
		}
		for j := range 8 {
			pair := (p + j) % 65536
			b[192+2*j], b[193+2*j] = byte(pair), byte(pair>>8)
		}
		d := ds[p/8%len(ds)]
		if p/8%3 != 0 {
			d = uint16(r.Uint32())&^0x7c00 | 0x2c00 // finite, of either sign
		}
		b[208], b[209] = byte(d), byte(d>>8)
		blocks = append(blocks, b)
	}
	want := make([]int8, 256*len(blocks))
	wantS := make([]float32, 8*len(blocks))
	var c [256]byte
	var rs, ro [16]float32
	for i, b := range blocks {
		ggmlCodes(op.GGMLQ6_K, b, 1, c[:], rs[:], ro[:])
		q6FoldRef(want[256*i:], wantS[8*i:], c[:], rs[:], b)
	}
	data := bytes.Join(blocks, nil)
	forEachKernel(t, func(t *testing.T) {
		qa := make([]int8, 256*len(blocks))
		sa := make([]float32, 8*len(blocks))
		q6KInt8(qa, sa, data, len(blocks))
		for i, b := range blocks {
			q, s := qa[256*i:256*i+256], sa[8*i:8*i+8]
			for k := range q {
				if q[k] != want[256*i+k] {
					t.Fatalf("block %d (sub-scales %d %d, d %#04x) element %d: %d, want %d", i, int8(b[192+k/16]), int8(b[192+(k/16)^1]), uint16(b[208])|uint16(b[209])<<8, k, q[k], want[256*i+k])
				}
			}
			for j := range s {
				if math.Float32bits(s[j]) != math.Float32bits(wantS[8*i+j]) {
					t.Fatalf("block %d group %d: scale %g, want %g", i, j, s[j], wantS[8*i+j])
				}
			}
		}
	})
}

// q6FoldRef is the fold of one Q6_K block in float64, group by group: runs of one scale keep
// their codes; else a_M, the sub-scale of larger magnitude (the first on a tie), gives the
// scale d a_M / 4 and the codes RNE(4 c a_h / a_M) clamped to [-128, 127].
func q6FoldRef(q []int8, s []float32, c []byte, rs []float32, blk []byte) {
	d := f16Tab()[uint16(blk[208])|uint16(blk[209])<<8]
	for j := range 8 {
		if math.Float32bits(rs[2*j]) == math.Float32bits(rs[2*j+1]) {
			s[j] = rs[2*j]
			for i := 32 * j; i < 32*j+32; i++ {
				q[i] = int8(c[i])
			}
			continue
		}
		a := [2]int{int(int8(blk[192+2*j])), int(int8(blk[193+2*j]))}
		aM := a[0]
		if abs(a[1]) > abs(a[0]) {
			aM = a[1]
		}
		s[j] = d * float32(aM) / 4
		for i := 32 * j; i < 32*j+32; i++ {
			v := 4 * float64(int8(c[i])) * float64(a[(i-32*j)/16])
			if aM != 0 {
				v = math.RoundToEven(v / float64(aM))
			}
			q[i] = int8(min(max(v, -128), 127))
		}
	}
}

// TestGGMLNibbleRow: the nibble form of Q4_0, Q4_1 and Q4_K rows (every kernel set) holds the
// codes and the scales and offsets of their byte form: code + NibbleOff is the byte form's
// code, bitwise; and the int8 products of the two forms are bitwise the same.
func TestGGMLNibbleRow(t *testing.T) {
	const N, K, T = 40, 768, 7
	x := optest.Floats(3, T*K, 1)
	for _, gt := range []op.GGMLType{op.GGMLQ4_0, op.GGMLQ4_1, op.GGMLQ4_K} {
		m, _, err := optest.RandGGML(uint64(70+gt), N, K, gt, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		w := ggmlInt8(m)
		if w.Nibbles == nil {
			t.Fatalf("%v: no nibble form", gt)
		}
		q, s, b := make([]int8, K), make([]float32, K/32), make([]float32, K/32)
		c, ns, nb := make([]byte, K/2), make([]float32, K/32), make([]float32, K/32)
		t.Run(gt.String(), func(t *testing.T) {
			forEachKernel(t, func(t *testing.T) {
				for n := range N {
					w.Row(n, q, s, b)
					w.Nibbles(n, c, ns, nb)
					for k := range K {
						if got := int32(c[k/2]>>(4*(k%2))&15) + w.NibbleOff; got != int32(q[k]) {
							t.Fatalf("%v row %d element %d: nibble code %d, byte code %d", gt, n, k, got, q[k])
						}
					}
					for g := range K / 32 {
						if math.Float32bits(ns[g]) != math.Float32bits(s[g]) || w.Bias && math.Float32bits(nb[g]) != math.Float32bits(b[g]) {
							t.Fatalf("%v row %d group %d: scale %g offset %g, byte form %g %g", gt, n, g, ns[g], nb[g], s[g], b[g])
						}
					}
				}
			})
		})
		var a qdot.Int8Act
		if err := qdot.QuantizeInt8(&a, x, T, K, 32); err != nil {
			t.Fatal(err)
		}
		bytesOnly := *w
		bytesOnly.Nibbles, bytesOnly.NibbleOff = nil, 0
		// The form packed at load (packNibbles): its scales alone are Nibbles' (every kernel
		// set), and its products, over every column range, are the byte form's bitwise.
		packed := ggmlInt8(m)
		n, err := packNibbles(packed, m.GG, N, K, 3)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64((N+31)/32*32*K/2 + N*K/gt.BlockSize()*(gt.TypeSize()-gt.BlockSize()/2)); n != want {
			t.Errorf("%v: packed %d bytes, want %d", gt, n, want)
		}
		t.Run(gt.String()+"/scales", func(t *testing.T) {
			forEachKernel(t, func(t *testing.T) {
				ps, pb := make([]float32, K/32), make([]float32, K/32)
				for n := range N {
					w.Row(n, q, s, b)
					packed.Scales(n, ps, pb)
					for g := range K / 32 {
						if math.Float32bits(ps[g]) != math.Float32bits(s[g]) || w.Bias && math.Float32bits(pb[g]) != math.Float32bits(b[g]) {
							t.Fatalf("row %d group %d: packed scale %g offset %g, the byte form's %g %g", n, g, ps[g], pb[g], s[g], b[g])
						}
					}
				}
			})
		})
		for _, k := range qdot.Int8Kernels() {
			y, want := make([]float32, T*N), make([]float32, T*N)
			if err := qdot.MatMulInt8(want, N, &a, &bytesOnly, 0, N, k); err != nil {
				t.Fatal(err)
			}
			for _, form := range []struct {
				name string
				w    *qdot.Int8Rows
			}{{"nibble", w}, {"packed", packed}} {
				for _, r := range [][2]int{{0, N}, {0, 32}, {32, N}, {8, N}, {5, 37}} {
					clear(y)
					if err := qdot.MatMulInt8(y[r[0]:], N, &a, form.w, r[0], r[1], k); err != nil {
						t.Fatal(err)
					}
					for i := range T {
						for j := r[0]; j < r[1]; j++ {
							if got, w := y[i*N+j], want[i*N+j]; math.Float32bits(got) != math.Float32bits(w) {
								t.Fatalf("%v %v columns [%d, %d): y[%d, %d] = %g in the %s form, %g in the byte form", gt, k, r[0], r[1], i, j, got, form.name, w)
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkGGMLExperts: routed experts whose weights come from memory, not cache, as at full
// size (Qwen3.5-35B-A3B's widths, D 2048 and I 512, Q4_K blocks; 64 experts top-2 at T = 2048:
// 64 rows an expert, the rows of its 256 experts top-8; 113 MB of weights), in int8 mode: the
// Q4_K blocks packed into panels at load (what Prepare makes) against unpacked from the blocks
// on every call (the form before packing). GFLOP/s counts 2 T topk 3 D I per call;
// cpu-GFLOP/s divides by the process's CPU time.
func BenchmarkGGMLExperts(b *testing.B) {
	const T, E, K, D, I = 2048, 64, 2, 2048, 512
	x := optest.Floats(3, T*D, 1)
	wt, idx := make([]float32, T*K), make([]int32, T*K)
	if err := topKRoute(wt, idx, optest.Floats(4, T*E, 1), T, E, K, true); err != nil {
		b.Fatal(err)
	}
	ye, rk := make([]float32, T*K*D), make([]int32, T*K)
	flops := 2 * float64(T*K) * 3 * D * I
	// Three random weights, their blocks copied for every expert (the products read each
	// expert's own memory).
	var proto [3]*op.Matrix
	for i, nk := range [3][2]int{{I, D}, {I, D}, {D, I}} {
		m, _, err := optest.RandGGML(uint64(90+i), nk[0], nk[1], op.GGMLQ4_K, 0.05)
		if err != nil {
			b.Fatal(err)
		}
		proto[i] = m
	}
	store := Backend{}.NewWeights(op.WeightOptions{Compute: op.ComputeInt8})
	packed := &op.Experts{E: E, D: D, I: I, Up: make([]*op.Matrix, E)}
	perCall := &op.Experts{E: E, D: D, I: I, Up: make([]*op.Matrix, E)}
	for e := 0; e < E; e++ {
		var ms [3]*op.Matrix
		for i, p := range proto {
			g := &op.GGMLBlocks{Type: p.GG.Type, Data: slices.Clone(p.GG.Data)}
			m, err := op.NewMatrixGGML(p.N, p.K, g)
			if err != nil {
				b.Fatal(err)
			}
			if ms[i], err = store.Prepare(m); err != nil {
				b.Fatal(err)
			}
			if !ms[i].Compute.Packed() {
				b.Fatal("Q4_K not packed in int8 mode")
			}
		}
		packed.GateUp, packed.Up[e], packed.Down = append(packed.GateUp, ms[0]), ms[1], append(packed.Down, ms[2])
		var un [3]*op.Matrix
		for i, m := range ms {
			cp := *m
			f := *m.Compute.(*computeForm)
			f.i8, f.packed = ggmlInt8(m), 0
			cp.Compute = &f
			un[i] = &cp
		}
		perCall.GateUp, perCall.Up[e], perCall.Down = append(perCall.GateUp, un[0]), un[1], append(perCall.Down, un[2])
	}
	for _, c := range []struct {
		name string
		ex   *op.Experts
	}{{"packed-at-load", packed}, {"per-call", perCall}} {
		b.Run(c.name, func(b *testing.B) {
			c0 := processCPU()
			for b.Loop() {
				if err := moeExperts(ye, rk, x, T, idx, K, c.ex); err != nil {
					b.Fatal(err)
				}
			}
			c1 := processCPU()
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(flops*float64(b.N)/(c1-c0)/1e9, "cpu-GFLOP/s")
		})
	}
}
