package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
)

// EncodeHeader lays tensors out back to back in the order given (Data may be nil: only the
// sizes their dtypes and shapes imply are used) and returns the file's first bytes, the 8-byte
// little-endian header length and the JSON header padded with spaces to a multiple of 8 bytes,
// with the data section's size. A writer that streams the tensors' bytes in the same order
// after it has written a valid file. Errors name the file and tensor (a duplicate name, a
// negative dimension, an unknown dtype, Data of the wrong length).
func EncodeHeader(name string, tensors []WriteTensor, metadata map[string]string) ([]byte, int64, error) {
	hj, size, err := encodeHeader(name, tensors, metadata, true)
	if err != nil {
		return nil, 0, err
	}
	out := make([]byte, 8, 8+len(hj))
	binary.LittleEndian.PutUint64(out, uint64(len(hj)))
	return append(out, hj...), size, nil
}

// ReadHeader reads the 8-byte header length and the JSON header from r (which is left at the
// start of the data section) and validates them as OpenHeader does: names, dtypes, shapes and
// offsets, which must tile the data section the header describes. It returns the file, whose
// tensors carry no Data (see Tensor.Offsets; File.DataSize is the size of the data section that
// follows), and the bytes read (length and header). name only names the stream in errors.
// Errors wrap ErrFormat, and say how many bytes a stream that ends early held.
func ReadHeader(name string, r io.Reader) (*File, []byte, error) {
	var lenBuf [8]byte
	if n, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: file is %d bytes, shorter than the 8-byte header length", ErrFormat, name, n)
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > MaxHeaderSize {
		return nil, nil, fmt.Errorf("%w: %s: header length %d exceeds the %d-byte limit", ErrFormat, name, hlen, MaxHeaderSize)
	}
	raw := make([]byte, 8+hlen)
	copy(raw, lenBuf[:])
	if n, err := io.ReadFull(r, raw[8:]); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: file ends %d bytes into its %d-byte header", ErrFormat, name, n, hlen)
	}
	f, err := parse(name, raw[8:], nil, 0, true)
	if err != nil {
		return nil, nil, err
	}
	return f, raw, nil
}

// Offsets returns the tensor's byte range [begin, end) in the data section of its file.
func (t *Tensor) Offsets() (begin, end int64) { return t.off, t.off + t.ByteSize() }

// DataStart is the file offset of the data section (8 + the header length): a tensor's bytes
// lie at DataStart + Offsets in the file.
func (f *File) DataStart() int64 { return f.dataStart }
