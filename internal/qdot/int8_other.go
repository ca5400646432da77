//go:build (!amd64 && !arm64) || purego

package qdot

// planInt8 is never called in this build: Go is its one int8 kernel.
func planInt8(k Kernel, src *i8src, _ int) i8plan { panic("qdot: no int8 kernel " + k.String()) }

// transposeBulk: this build packs no panels (its one kernel reads the weight as it is).
func transposeBulk(_, _ []uint32, _, _ int, _ bool, _ uint32) int { return 0 }
