//go:build !linux && !darwin

package strata

// memLimits are unknown on this platform: the memory checks pass.
func memLimits() []memLimit { return nil }
