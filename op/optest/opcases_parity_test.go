package optest

import (
	"math"
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/op"
)

// internal/opcases held these tables and generators before this package; the tests that still
// use it set their tolerances on its inputs. This test pins that the moved generators produce
// the same bits and that every table starts with the old table unchanged (new cases are
// appended). It goes away with internal/opcases.

func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d values, opcases %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d = %g, opcases %g", what, i, a[i], b[i])
		}
	}
}

func TestGeneratorsMatchOpcases(t *testing.T) {
	for seed := uint64(0); seed < 5; seed++ {
		sameBits(t, "Floats", Floats(seed, 1000, 0.7), opcases.Floats(seed, 1000, 0.7))
		sameBits(t, "Uniform", Uniform(seed, 1000, -2, 3), opcases.Uniform(seed, 1000, -2, 3))
		exactI32(t, "Tokens", Tokens(seed, 500, 1000, 7, 6), opcases.Tokens(seed, 500, 1000, 7, 6))
		exactI32(t, "Slots", Slots(seed, 17, 10, 200, 7), opcases.Slots(seed, 17, 10, 200, 7))
		x := Floats(seed, 777, 3)
		for _, dt := range WeightDTypes {
			bits, wide := Round16(x, dt)
			obits, owide := opcases.Round16(x, dt.String())
			sameBits(t, "Round16 "+dt.String(), wide, owide)
			if len(bits) != len(obits) {
				t.Fatalf("Round16 %v: %d bits, opcases %d", dt, len(bits), len(obits))
			}
			for i := range bits {
				if bits[i] != obits[i] {
					t.Fatalf("Round16 %v: bits %d differ", dt, i)
				}
			}
		}
	}
}

func TestTablesExtendOpcases(t *testing.T) {
	if got, want := DenseT, opcases.DenseT; len(got) != len(want) {
		t.Fatalf("DenseT %v, opcases %v", got, want)
	}
	gemm, ogemm := GEMMCases(), opcases.GEMMCases()
	for i, o := range ogemm {
		c := gemm[i]
		if c.T != o.T || c.N != o.N || c.K != o.K || c.DType.String() != o.DType {
			t.Fatalf("GEMMCases[%d] = %+v, opcases %+v", i, c, o)
		}
	}
	norm, onorm := NormCases(), opcases.NormCases()
	for i, o := range onorm {
		if c := norm[i]; c.T != o.T || c.S != o.S || c.D != o.D {
			t.Fatalf("NormCases[%d] = %+v, opcases %+v", i, c, o)
		}
	}
	rope, orope := RoPECases(), opcases.RoPECases()
	for i, o := range orope {
		if c := rope[i]; c.T != o.T || c.H != o.H || c.Dh != o.Dh || c.Rot != o.Rot || c.Pos0 != o.Pos0 || c.Theta != o.Theta || c.PerRow != o.PerRow {
			t.Fatalf("RoPECases[%d] = %+v, opcases %+v", i, c, o)
		}
	}
	moe, omoe := MoECases(), opcases.MoECases()
	for i, o := range omoe {
		if c := moe[i]; c.T != o.T || c.E != o.E || c.K != o.K || c.D != o.D || c.I != o.I || c.Norm != o.Norm || c.DType.String() != o.DType || c.Ties {
			t.Fatalf("MoECases[%d] = %+v, opcases %+v", i, c, o)
		}
	}
	gr, ogr := GRCases(), opcases.GRCases()
	for i, o := range ogr {
		if c := gr[i]; c.T != o.T || c.S != o.S || c.D != o.D || c.R != o.R || c.Inject != o.Inject || c.DType.String() != o.DType {
			t.Fatalf("GRCases[%d] = %+v, opcases %+v", i, c, o)
		}
	}
	ple, ople := PLECases(), opcases.PLECases()
	for i, o := range ople {
		c := ple[i]
		if c.T != o.T || c.S != o.S || c.D != o.D || c.Heads != o.Heads || c.HeadDim != o.HeadDim || c.Rows != o.Rows ||
			c.ConvK != o.ConvK || c.Dilation != o.Dilation || c.Split != o.Split || c.DType.String() != o.DType {
			t.Fatalf("PLECases[%d] = %+v, opcases %+v", i, c, o)
		}
	}
	attn, oattn := AttentionCases(), opcases.AttentionCases()
	for i, o := range oattn {
		c := attn[i]
		if c.Name != o.Name || c.T != o.T || c.Pos0 != o.Pos0 || c.Hq != o.Hq || c.Hkv != o.Hkv || c.D != o.D || c.Seed != o.Seed {
			t.Fatalf("AttentionCases[%d] = %+v, opcases %+v", i, c, o)
		}
		if c.T <= 65 {
			q, k, v := c.Inputs()
			oq, ok, ov := o.Inputs()
			sameBits(t, c.Name+" q", q, oq)
			sameBits(t, c.Name+" k", k, ok)
			sameBits(t, c.Name+" v", v, ov)
		}
	}
	qsa, oqsa := QSACases(), opcases.QSACases()
	for i, o := range oqsa {
		c := qsa[i]
		if c.Name != o.Name || c.T != o.T || c.Pos0 != o.Pos0 || c.NHeads != o.NHeads || c.Dim != o.Dim || c.Ratio != o.Ratio ||
			c.Budget != o.Budget || c.Rot != o.Rot || c.Theta != o.Theta || c.Eps != o.Eps || c.Hq != o.Hq || c.Hkv != o.Hkv ||
			c.D != o.D || c.Seed != o.Seed {
			t.Fatalf("QSACases[%d] = %+v, opcases %+v", i, c, o)
		}
		a := [6][]float32{}
		b := [6][]float32{}
		a[0], a[1], a[2], a[3], a[4], a[5] = c.Inputs()
		b[0], b[1], b[2], b[3], b[4], b[5] = o.Inputs()
		for j := range a {
			sameBits(t, c.Name, a[j], b[j])
		}
	}
	gdn, ogdn := GDNCases(), opcases.GDNCases()
	for i, o := range ogdn {
		c := gdn[i]
		if c.Name != o.Name || c.T != o.T || c.Hk != o.Hk || c.Hv != o.Hv || c.Dk != o.Dk || c.Dv != o.Dv ||
			c.ConvK != o.ConvK || c.Tiled != o.Tiled || c.Seed != o.Seed {
			t.Fatalf("GDNCases[%d] = %+v, opcases %+v", i, c, o)
		}
		in := c.Inputs()
		oin := opcases.GDNCase{Name: o.Name, T: o.T, Hk: o.Hk, Hv: o.Hv, Dk: o.Dk, Dv: o.Dv, ConvK: o.ConvK, Tiled: o.Tiled, Seed: o.Seed}.Inputs()
		for _, p := range [][2][]float32{{in.QKV, oin.QKV}, {in.A, oin.A}, {in.B, oin.B}, {in.ConvW, oin.ConvW},
			{in.ConvState, oin.ConvState}, {in.ALog, oin.ALog}, {in.DtBias, oin.DtBias}, {in.Q, oin.Q}, {in.K, oin.K},
			{in.V, oin.V}, {in.G, oin.G}, {in.Beta, oin.Beta}, {in.State, oin.State}, {in.Z, oin.Z}, {in.NormW, oin.NormW}} {
			sameBits(t, c.FullName(), p[0], p[1])
		}
	}
	if GDNScanFLOPs(512, 128, 128, op.GDNChunk) != opcases.GDNScanFLOPs(512, 128, 128, op.GDNChunk) {
		t.Fatal("GDNScanFLOPs differs")
	}
}
