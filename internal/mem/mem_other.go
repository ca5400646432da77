//go:build !linux

package mem

// AdviseHuge does nothing: transparent huge pages are a Linux hint.
func AdviseHuge[E any](b []E) {}

// Populate does nothing: MADV_POPULATE_WRITE is a Linux hint.
func Populate[E any](b []E) {}

// PopulateRead does nothing: MADV_POPULATE_READ is a Linux hint.
func PopulateRead(b []byte) {}
