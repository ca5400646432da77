package gguf

import (
	"os"
	"testing"
	"unsafe"

	"github.com/stratakernels/strata/internal/mem/memtest"
	"github.com/stratakernels/strata/op"
)

// TestEvictTensor: File.Evict(t.Data) drops the process's pages of that tensor's data only
// (the mapping's Rss in /proc/self/smaps falls by the whole pages inside it), the data reads
// back unchanged, and a slice outside the mapping is left alone.
func TestEvictTensor(t *testing.T) {
	const n = 64 << 10 // floats a tensor: 256 KiB, 64 pages of 4 KiB
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i), -float32(i)
	}
	im := newImage()
	im.kvs = []KV{kv("general.architecture", "qwen35")}
	im.tensors = []wTensor{
		{name: "a", dims: []uint64{n}, typ: op.GGMLF32, data: f32Bytes(a...)},
		{name: "b", dims: []uint64{n}, typ: op.GGMLF32, data: f32Bytes(b...)},
	}
	f, err := Open(im.write(t, "evict.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ta, tb := f.Tensor("a"), f.Tensor("b")
	touched := make([]byte, len(ta.Data)+len(tb.Data)) // every page of both read
	copy(touched, ta.Data)
	copy(touched[len(ta.Data):], tb.Data)
	at := uintptr(unsafe.Pointer(&ta.Data[0]))
	before := memtest.SmapsKiB(t, at, "Rss:")
	heap := make([]byte, 1<<20)
	heap[0] = 1
	f.Evict(heap) // not the file's: nothing happens
	f.Evict(ta.Data)
	after := memtest.SmapsKiB(t, at, "Rss:")
	page := os.Getpagesize()
	inside := (len(ta.Data) - page) / page * page / 1024 // KiB of whole pages inside a, at the least
	if before-after < inside || before-after > len(ta.Data)/1024 {
		t.Errorf("the mapping's Rss went %d -> %d KiB; evicting a (%d bytes) should drop %d-%d KiB", before, after, len(ta.Data), inside, len(ta.Data)/1024)
	}
	if heap[0] != 1 {
		t.Error("Evict of a slice outside the mapping changed it")
	}
	got := append(append([]byte(nil), ta.Data...), tb.Data...)
	want := append(f32Bytes(a...), f32Bytes(b...)...)
	if string(got) != string(want) {
		t.Error("the tensors read back differently after Evict")
	}
}
