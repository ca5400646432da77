package metal

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stratakernels/strata/op"
	"github.com/stratakernels/strata/op/optest"
)

// TestGDNScanChunk runs the chunked kernel gdn_scan_chunk on lengths around the chunk of 64 (one
// partial chunk, exactly one, one plus one token, two plus two tokens), Hk 2 / Hv 6 in both head
// maps, the real head size 128 and odd sizes (a partial 32-column slab, Dk not a multiple of
// the 16-dim staging slice or of the 4 simdgroups), against the float64 recurrence; 2e-6
// relative to max |want| for o and the final state.
func TestGDNScanChunk(t *testing.T) {
	var cs []optest.GDNCase
	seed := uint64(900)
	add := func(T, Dk, Dv int, tiled bool) {
		cs = append(cs, optest.GDNCase{T: T, Hk: 2, Hv: 6, Dk: Dk, Dv: Dv, ConvK: 4, Tiled: tiled, Seed: seed})
		seed++
	}
	for _, T := range []int{1, 3, 63, 64, 65, 130} {
		add(T, 128, 128, false)
	}
	add(65, 128, 128, true)
	add(130, 37, 40, false)
	add(66, 13, 8, true)
	for _, c := range cs {
		t.Run(fmt.Sprintf("T%d_dk%d_dv%d_tiled%v", c.T, c.Dk, c.Dv, c.Tiled), func(t *testing.T) {
			in := c.Inputs()
			normQK(in.Q, in.K, c.Dk)
			b := testBackend(t)
			o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
			a := op.GDNScan{O: f32(o), State: f32(st), Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(in.G), Beta: f32(in.Beta),
				P: c.Params(), Mode: op.Chunked}
			exec(t, b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
			wo, ws := optest.RefGDNScan(c.Params(), optest.To64(in.Q), optest.To64(in.K), optest.To64(in.V), optest.To64(in.G),
				optest.To64(in.Beta), optest.To64(in.State))
			checkClose64(t, "o", o, wo, 2e-6)
			checkClose64(t, "state", st, ws, 2e-6)
			checkVariant(t, b, "gdn_scan_chunk_f32_c64_dv32 x1")
		})
	}
}

// TestGDNScanChunkSplit: the chunked kernel over T = 130 in one Pass equals calls of 3 + 61 + 66
// and 65 + 65 tokens that carry the state (chunks restart at every call), within 2e-6 relative.
func TestGDNScanChunkSplit(t *testing.T) {
	c := optest.GDNCase{T: 130, Hk: 2, Hv: 6, Dk: 48, Dv: 40, ConvK: 4, Seed: 77}
	in := c.Inputs()
	normQK(in.Q, in.K, c.Dk)
	b := testBackend(t)
	p := c.Params()
	o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
	gdnScanChunked := func(o, st, q, k, v, g, beta []float32, p op.GDNParams) {
		a := op.GDNScan{O: f32(o), State: f32(st), Q: f32(q), K: f32(k), V: f32(v), G: f32(g), Beta: f32(beta), P: p, Mode: op.Chunked}
		exec(t, b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
	}
	gdnScanChunked(o, st, in.Q, in.K, in.V, in.G, in.Beta, p)
	qk, hv := c.Hk*c.Dk, c.Hv*c.Dv
	for _, split := range [][]int{{3, 61, 66}, {65, 65}} {
		so, ss := make([]float32, 0, len(o)), append([]float32(nil), in.State...)
		t0 := 0
		for _, n := range split {
			sp := p
			sp.T = n
			part := make([]float32, n*hv)
			gdnScanChunked(part, ss, in.Q[t0*qk:(t0+n)*qk], in.K[t0*qk:(t0+n)*qk], in.V[t0*hv:(t0+n)*hv],
				in.G[t0*c.Hv:(t0+n)*c.Hv], in.Beta[t0*c.Hv:(t0+n)*c.Hv], sp)
			so = append(so, part...)
			t0 += n
		}
		checkClose(t, fmt.Sprintf("split %v o", split), so, o, 2e-6)
		checkClose(t, fmt.Sprintf("split %v state", split), ss, st, 2e-6)
	}
}

// TestGDNScanPrefer: gdn_scan's kernels are listed, an unknown kernel is refused, and the scan
// mode picks the kernel: ScanAuto the preferred one (the recurrent kernel by default),
// Recurrent and Chunked their own whatever the preference.
func TestGDNScanPrefer(t *testing.T) {
	b := testBackend(t)
	if err := b.Prefer("gdn_scan", "gdn_scan_c32"); !errors.Is(err, op.ErrInvalidArgument) {
		t.Fatalf("unknown kernel: err %v, want ErrInvalidArgument", err)
	}
	c := optest.GDNCase{T: 3, Hk: 2, Hv: 6, Dk: 16, Dv: 8, ConvK: 4, Seed: 5}
	in := c.Inputs()
	normQK(in.Q, in.K, c.Dk)
	const rec, chunk = "gdn_scan_f32_dv32_nsg4 x1", "gdn_scan_chunk_f32_c64_dv32 x1"
	for _, tc := range []struct {
		prefer string
		mode   op.ScanMode
		want   string
	}{
		{"", op.ScanAuto, rec}, {"gdn_scan", op.ScanAuto, rec}, {"gdn_scan_chunk", op.ScanAuto, chunk},
		{"gdn_scan_chunk", op.Recurrent, rec}, {"gdn_scan", op.Chunked, chunk}, {"", op.ScanAuto, rec},
	} {
		if err := b.Prefer("gdn_scan", tc.prefer); err != nil {
			t.Fatal(err)
		}
		b.ResetVariants()
		o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
		a := op.GDNScan{O: f32(o), State: f32(st), Q: f32(in.Q), K: f32(in.K), V: f32(in.V), G: f32(in.G), Beta: f32(in.Beta), P: c.Params(), Mode: tc.mode}
		exec(t, b, func(p op.Pass) error { return p.GDNScan(a) }, &a)
		if v := strings.Join(b.Variants(), ","); v != tc.want {
			t.Fatalf("Prefer(%q), mode %d: variants %s, want %s", tc.prefer, tc.mode, v, tc.want)
		}
	}
}
