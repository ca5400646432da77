//go:build !linux && !darwin

package strata

// memAvailable is unknown on this platform: the memory checks pass.
func memAvailable() (int64, bool) { return 0, false }
