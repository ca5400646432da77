package blas

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// cpuKey describes this CPU for the speed cache: its brand string (machdep.cpu.brand_string)
// and the SIMD features the kernels choose by.
func cpuKey() string {
	brand, err := unix.Sysctl("machdep.cpu.brand_string")
	if err != nil {
		brand = runtime.GOARCH
	}
	return brand + " | " + cpuFeatureKey(simdFeatures())
}

// libKey identifies Accelerate for the speed cache by the system's version (the framework is
// part of it).
func libKey() string {
	v, err := unix.Sysctl("kern.osversion")
	if err != nil {
		return "macOS"
	}
	return "macOS build " + v
}
