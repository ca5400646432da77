//go:build !linux && !darwin

package blas

import (
	"errors"
	"runtime"
)

func loadNative(int) (backend, error) {
	return nil, errors.New("no native BLAS loader for " + runtime.GOOS)
}

func setNativeThreads(int) bool { return false }

func nativeThreads() int { return 0 }

func numCPU() int { return runtime.NumCPU() }
