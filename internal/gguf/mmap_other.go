//go:build !unix

package gguf

import (
	"io"
	"os"
)

// mapFile reads the file into memory where no mmap is available (nothing to evict).
func mapFile(f *os.File, size int64) ([]byte, func() error, func([]byte), error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		return nil, nil, nil, err
	}
	return b, func() error { return nil }, nil, nil
}
