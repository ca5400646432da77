//go:build !amd64 || purego

package blas

const hasTranspose8 = false

func transpose8(dst *float32, ldd int, src *float32, lds int, k int) {
	panic("blas: no transpose kernel in this build")
}

func addTo8(dst, src *float32, n int) { panic("blas: no vector add in this build") }
