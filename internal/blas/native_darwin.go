package blas

import "fmt"

const accelerateFramework = "/System/Library/Frameworks/Accelerate.framework/Accelerate"

// loadNative opens Accelerate. Its thread use is governed by the system (VECLIB_MAXIMUM_THREADS),
// not by this package, so threads is only reported.
func loadNative(threads int) (backend, error) {
	lib, err := dlopen(accelerateFramework)
	if err != nil {
		return nil, fmt.Errorf("accelerate: %v", err)
	}
	b := &cblasBackend{label: "accelerate (cblas_sgemm)"}
	if err := symbol(lib, &b.fn, "cblas_sgemm"); err != nil {
		return nil, fmt.Errorf("accelerate: %v", err)
	}
	_ = threads
	return b, nil
}

func setNativeThreads(int) bool { return false }

func nativeThreads() int { return 0 }
