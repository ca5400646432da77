//go:build !amd64 || purego

package kernels

// This build has no assembly float-format decoding kernels (arm64 runs the portable ones).
const hasFPAsm = false

func e4m3DecodeAVX2(dst *float32, codes *uint8, scales *float32, groups, glen int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func e4m3Decode512(dst *float32, codes *uint8, scales *float32, groups, glen int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func e2m1DecodeAVX2(dst *float32, codes *uint32, scales *float32, groups, glen int) {
	panic("kernels: no assembly decoding kernels in this build")
}

func e2m1Decode512(dst *float32, codes *uint32, scales *float32, groups, glen int) {
	panic("kernels: no assembly decoding kernels in this build")
}
