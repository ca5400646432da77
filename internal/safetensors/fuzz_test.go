package safetensors

import (
	"errors"
	"testing"
)

// FuzzParseHeader feeds arbitrary images to ParseHeader. It must never panic, and every image
// it accepts must satisfy the invariants later code relies on: each tensor's bytes lie inside
// the image, match product(shape) * dtype size, and convert without error for its dtype family.
// The seed corpus is in testdata/fuzz/FuzzParseHeader.
func FuzzParseHeader(f *testing.F) {
	f.Add(validImage())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseHeader("fuzz.safetensors", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error does not wrap ErrFormat: %v", err)
			}
			return
		}
		names := file.Names()
		var covered int64
		for i, n := range names {
			if i > 0 && names[i-1] >= n {
				t.Fatalf("names not sorted and unique: %q", names)
			}
			tn, err := file.Tensor(n)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(tn.Data)) != tn.NumElements()*int64(tn.DType.Size()) {
				t.Fatalf("%q: %d bytes for %s %v", n, len(tn.Data), tn.DType, tn.Shape)
			}
			covered += int64(len(tn.Data))
			switch tn.DType {
			case F32, F16, BF16:
				if _, err := tn.Float32(); err != nil {
					t.Fatalf("%q: %v", n, err)
				}
			case I32, U8, BOOL:
				if _, err := tn.Int32(); err != nil {
					t.Fatalf("%q: %v", n, err)
				}
			case I64:
				if _, err := tn.Int32(); err != nil && !errors.Is(err, ErrDType) {
					t.Fatalf("%q: %v", n, err)
				}
			}
		}
		if covered > int64(len(data)) {
			t.Fatalf("tensors cover %d bytes of a %d-byte image", covered, len(data))
		}
	})
}
