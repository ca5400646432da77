//go:build !linux && !darwin

package blas

import "runtime"

// cpuKey: no CPU identification is read on this system; there is no native library to time
// against either (native_other.go).
func cpuKey() string { return runtime.GOARCH + " | " + cpuFeatureKey(simdFeatures()) }

func libKey() string { return "" }
