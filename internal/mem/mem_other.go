//go:build !linux

package mem

// AdviseHuge does nothing: transparent huge pages are a Linux hint.
func AdviseHuge[E any](b []E) {}

// PopulateRead does nothing: MADV_POPULATE_READ is a Linux hint.
func PopulateRead(b []byte) {}
