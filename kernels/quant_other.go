//go:build !amd64 || purego

package kernels

// This build has no assembly dequantization kernels (arm64 runs the portable one).
const hasQuantAsm = false

func qDequantAVX2(dst *float32, codes *uint32, sb *float32, groups, chunks, bits int, tbl *qTable) {
	panic("kernels: no assembly dequantization kernels in this build")
}

func qDequant512(dst *float32, codes *uint32, sb *float32, groups, chunks, bits int, tbl *qTable) {
	panic("kernels: no assembly dequantization kernels in this build")
}
