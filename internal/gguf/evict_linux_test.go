package gguf

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

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
	before := mappingRss(t, at)
	heap := make([]byte, 1<<20)
	heap[0] = 1
	f.Evict(heap) // not the file's: nothing happens
	f.Evict(ta.Data)
	after := mappingRss(t, at)
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

// mappingRss is the Rss in KiB of the mapping of /proc/self/smaps that holds address a.
func mappingRss(t *testing.T, a uintptr) int {
	fh, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if rng, _, ok := strings.Cut(line, " "); ok && strings.Contains(rng, "-") && !strings.HasSuffix(rng, ":") {
			lo, hi, _ := strings.Cut(rng, "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(a) >= l && uint64(a) < h
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); in && ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", a)
	return 0
}
