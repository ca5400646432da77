//go:build !darwin

package metal

import (
	"fmt"

	"github.com/stratakernels/strata/metal/mtl"
)

// SystemDevice opens the system default Metal device; Metal exists only on darwin, so here it
// always fails. Tests and Linux hosts use the emulator (emu) instead.
func SystemDevice() (mtl.Device, error) {
	return nil, fmt.Errorf("metal: no Metal framework on this platform")
}
