package metal

import "github.com/stratakernels/strata/op"

// Host side of gdn_scan_chunk (gdn.metal): the chunked WY form of gdn_scan, chunk
// op.GDNChunk = 64 tokens (docs/MODELS.md "Chunked form"). It runs for op.Chunked, and for
// op.ScanAuto under Prefer("gdn_scan", "gdn_scan_chunk"). It agrees with the recurrent kernel
// and both CPU modes within float32 rounding (about 1e-6 relative to max |o|), not bitwise.

// gdnScanChunkKernel is the MSL function of the chunked variant.
const gdnScanChunkKernel = "gdn_scan_chunk"

// gdnScanChunk encodes gdn_scan_chunk: grid (ceil(Dv / 32), Hv), 128 threads (state columns in
// slabs of 32, Dk <= 128 rows in registers as gdn_scan). The caller checked the shapes.
func (j *Pass) gdnScanChunk(bo, bs, bq, bk, bv, bg, bbeta *Tensor, p op.GDNParams) error {
	pipe, err := j.b.pipeline("gdn.metal", gdnScanChunkKernel, nil)
	if err != nil {
		return j.fail(err)
	}
	j.dispatch(pipe, "gdn_scan_chunk_f32_c64_dv32", [3]int{(p.Dv + 31) / 32, p.Hv, 1}, [3]int{128, 1, 1}, 0,
		bo, bs, bq, bk, bv, bg, bbeta, paramBytes(gdnScanParams{T: p.T, Hk: p.Hk, Hv: p.Hv, Dk: p.Dk, Dv: p.Dv, Tiled: p.Map == op.Tiled}))
	return j.err
}
