package metal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/opcases"
	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal/emu"
	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// gdnChunkInputs returns the scan inputs of case c with q, k normalised as GDNPre leaves them.
func gdnChunkInputs(t *testing.T, c opcases.GDNCase) opcases.GDNInputs {
	t.Helper()
	in := c.Inputs()
	if err := kernels.GDNNormQK(in.Q, in.K, c.T, c.Hk, c.Dk); err != nil {
		t.Fatal(err)
	}
	return in
}

// chunkBackend is a Backend on dev (the shared emulator when nil) that runs gdn_scan_chunk.
func chunkBackend(t *testing.T, dev mtl.Device) *Backend {
	t.Helper()
	var b *Backend
	if dev == nil {
		b = testBackend(t)
	} else {
		var err error
		if b, err = New(dev); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Prefer("gdn_scan", "gdn_scan_chunk"); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGDNScanChunk runs the chunked variant gdn_scan_chunk on lengths around the chunk of 64 (one
// partial chunk, exactly one, one plus one token, two plus two tokens), Hk 2 / Hv 6 in both head
// maps, the real head size 128 and odd sizes (a partial 32-column slab, Dk not a multiple of
// the 16-dim staging slice or of the 4 simdgroups), against the CPU scan in both modes.
// Tolerance 2e-6 relative to max |want| for o and the final state.
func TestGDNScanChunk(t *testing.T) {
	var cs []opcases.GDNCase
	seed := uint64(900)
	add := func(name string, T, Dk, Dv int, tiled bool) {
		cs = append(cs, opcases.GDNCase{Name: name, T: T, Hk: 2, Hv: 6, Dk: Dk, Dv: Dv, ConvK: 4, Tiled: tiled, Seed: seed})
		seed++
	}
	for _, T := range []int{1, 3, 63, 64, 65, 130} {
		add("grouped_dk128_dv128", T, 128, 128, false)
	}
	add("tiled_dk128_dv128", 65, 128, 128, true)
	add("grouped_dk37_dv40", 130, 37, 40, false)
	add("tiled_dk13_dv8", 66, 13, 8, true)
	for _, c := range cs {
		t.Run(fmt.Sprintf("%s_T%d", c.Name, c.T), func(t *testing.T) {
			in := gdnChunkInputs(t, c)
			p := gdnParams(c)
			b := chunkBackend(t, nil)
			o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
			if err := b.GDNScan(o, st, in.Q, in.K, in.V, in.G, in.Beta, p); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []kernels.ScanMode{kernels.Chunked, kernels.Recurrent} {
				wo, ws := make([]float32, len(o)), append([]float32(nil), in.State...)
				if err := kernels.GDNScan(wo, ws, in.Q, in.K, in.V, in.G, in.Beta, p, mode); err != nil {
					t.Fatal(err)
				}
				name := map[kernels.ScanMode]string{kernels.Chunked: "cpu chunked", kernels.Recurrent: "cpu recurrent"}[mode]
				checkClose(t, name+" o", o, wo, 2e-6)
				checkClose(t, name+" state", st, ws, 2e-6)
			}
			want := "gdn_scan_chunk_f32_c64_dv32 x1"
			if v := b.Variants(); !slices.Contains(v, want) {
				t.Fatalf("variants %v, want %q", v, want)
			}
		})
	}
}

// TestGDNScanChunkSplit: the chunked variant over T = 130 in one call equals calls of 3 + 61 + 66
// and 65 + 65 tokens that carry the state (chunks restart at every call), within 2e-6 relative.
func TestGDNScanChunkSplit(t *testing.T) {
	c := opcases.GDNCase{T: 130, Hk: 2, Hv: 6, Dk: 48, Dv: 40, ConvK: 4, Seed: 77}
	in := gdnChunkInputs(t, c)
	p := gdnParams(c)
	b := chunkBackend(t, nil)
	o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
	if err := b.GDNScan(o, st, in.Q, in.K, in.V, in.G, in.Beta, p); err != nil {
		t.Fatal(err)
	}
	qk, hv := c.Hk*c.Dk, c.Hv*c.Dv
	for _, split := range [][]int{{3, 61, 66}, {65, 65}} {
		so, ss := make([]float32, 0, len(o)), append([]float32(nil), in.State...)
		t0 := 0
		for _, n := range split {
			sp := p
			sp.T = n
			part := make([]float32, n*hv)
			if err := b.GDNScan(part, ss, in.Q[t0*qk:(t0+n)*qk], in.K[t0*qk:(t0+n)*qk], in.V[t0*hv:(t0+n)*hv],
				in.G[t0*c.Hv:(t0+n)*c.Hv], in.Beta[t0*c.Hv:(t0+n)*c.Hv], sp); err != nil {
				t.Fatal(err)
			}
			so = append(so, part...)
			t0 += n
		}
		checkClose(t, fmt.Sprintf("split %v o", split), so, o, 2e-6)
		checkClose(t, fmt.Sprintf("split %v state", split), ss, st, 2e-6)
	}
}

// TestGDNScanChunkSchedules: gdn_scan_chunk gives the forward schedule's bits under the
// emulator's reversed and shuffled lane schedules and in an AddressSanitizer build (every buffer
// at its exact length, threadgroup arrays guarded), on two chunks, a partial slab and both head
// maps; its static threadgroup memory is the 29,952 B its comment states.
func TestGDNScanChunkSchedules(t *testing.T) {
	cs := []opcases.GDNCase{
		{T: 65, Hk: 2, Hv: 6, Dk: 48, Dv: 40, ConvK: 4, Seed: 81},
		{T: 70, Hk: 2, Hv: 6, Dk: 20, Dv: 8, ConvK: 4, Tiled: true, Seed: 82},
	}
	run := func(b *Backend) [][]float32 {
		var out [][]float32
		for _, c := range cs {
			in := gdnChunkInputs(t, c)
			o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
			if err := b.GDNScan(o, st, in.Q, in.K, in.V, in.G, in.Beta, gdnParams(c)); err != nil {
				t.Fatal(err)
			}
			out = append(out, o, st)
		}
		return out
	}
	want := run(chunkBackend(t, nil))
	for _, o := range []emu.Options{
		{Threads: 2, Schedule: emu.Reversed},
		{Threads: 2, Schedule: emu.Shuffled, Seed: 9},
		{Threads: 2, ASan: true},
	} {
		dev, err := emu.Open(o)
		if err != nil {
			t.Fatal(err)
		}
		got := run(chunkBackend(t, dev))
		name := o.Schedule.String()
		if o.ASan {
			name = "asan"
		}
		for i := range want {
			checkBitwise(t, name, got[i], want[i])
		}
		tgMem := -1
		for _, st := range dev.(*emu.Device).Stats() {
			if st.Kernel == "gdn_scan_chunk" {
				tgMem = st.StaticThreadgroupMemory
			}
		}
		if tgMem != 29952 {
			t.Errorf("%s: gdn_scan_chunk used %d B of threadgroup memory, want 29952", name, tgMem)
		}
		dev.Close()
	}
}

// TestGDNScanChunkGolden: the chunked variant at the full model's shapes against the
// transformers golden (T = 100, Hk 16, Hv 48, dk = dv = 128); tolerance 1e-6 relative, as
// the recurrent kernel's.
func TestGDNScanChunkGolden(t *testing.T) {
	g := golden(t, "op_gdn.safetensors", "q", "k", "v", "g", "beta", "state_in", "o", "state_out")
	p := op.GDNParams{T: 100, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4}
	q, k := g["q"], g["k"]
	if err := kernels.GDNNormQK(q, k, p.T, p.Hk, p.Dk); err != nil {
		t.Fatal(err)
	}
	b := chunkBackend(t, nil)
	o, state := make([]float32, len(g["o"])), append([]float32(nil), g["state_in"]...)
	if err := b.GDNScan(o, state, q, k, g["v"], g["g"], g["beta"], p); err != nil {
		t.Fatal(err)
	}
	checkClose(t, "o", o, g["o"], 1e-6)
	checkClose(t, "state", state, g["state_out"], 1e-6)
}

// TestGDNScanPrefer: gdn_scan's kernels are listed, an unknown kernel is refused, and the
// default (no preference) dispatches the recurrent kernel.
func TestGDNScanPrefer(t *testing.T) {
	b := testBackend(t)
	if err := b.Prefer("gdn_scan", "gdn_scan_c32"); !errors.Is(err, op.ErrInvalidArgument) {
		t.Fatalf("unknown kernel: err %v, want ErrArg", err)
	}
	c := opcases.GDNCase{T: 3, Hk: 2, Hv: 6, Dk: 16, Dv: 8, ConvK: 4, Seed: 5}
	in := gdnChunkInputs(t, c)
	for _, k := range []string{"", "gdn_scan", "gdn_scan_chunk", ""} {
		if err := b.Prefer("gdn_scan", k); err != nil {
			t.Fatal(err)
		}
		b.ResetVariants()
		o, st := make([]float32, c.T*c.Hv*c.Dv), append([]float32(nil), in.State...)
		if err := b.GDNScan(o, st, in.Q, in.K, in.V, in.G, in.Beta, gdnParams(c)); err != nil {
			t.Fatal(err)
		}
		want := "gdn_scan_f32_dv32_nsg4 x1"
		if k == "gdn_scan_chunk" {
			want = "gdn_scan_chunk_f32_c64_dv32 x1"
		}
		if v := strings.Join(b.Variants(), ","); v != want {
			t.Fatalf("Prefer(%q): variants %s, want %s", k, v, want)
		}
	}
}
