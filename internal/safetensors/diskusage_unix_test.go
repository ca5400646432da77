//go:build unix

package safetensors

import (
	"os"
	"syscall"
)

// diskBytes is the disk space a file occupies (its allocated blocks), where the platform says.
func diskBytes(st os.FileInfo) (int64, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(sys.Blocks) * 512, true
}
