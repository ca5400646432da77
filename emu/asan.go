package emu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
	"unsafe"

	"github.com/stratakernels/strata/metal/mtl"
)

// The ASan build runs in a helper process: an instrumented library cannot be loaded into a Go
// process without the sanitizer runtime preloaded, and a fault must not take the caller down.
// The helper is the library linked with rt/driver.cpp; it receives the buffers and dispatches on
// stdin and returns results on stdout.

func descBytes(d *dispatchDesc) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(d)), unsafe.Sizeof(*d))
}

// runHelper runs descs (whose Buf fields encode (buffer id + 1) << 40 | offset) against the
// contents of bufs in lib's helper, writes the results back into descs and, on success, the
// buffers' new contents into bufs.
func (d *Device) runHelper(lib *library, descs []*dispatchDesc, bufs [][]byte) error {
	var req bytes.Buffer
	req.WriteString("EMU1")
	binary.Write(&req, binary.LittleEndian, uint32(len(bufs)))
	for _, b := range bufs {
		binary.Write(&req, binary.LittleEndian, uint64(len(b)))
		req.Write(b)
	}
	binary.Write(&req, binary.LittleEndian, uint32(len(descs)))
	for _, ds := range descs {
		req.Write(descBytes(ds))
	}
	cmd := exec.Command(lib.path)
	cmd.Stdin = &req
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	env := append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=66")
	if sym, err := exec.LookPath("llvm-symbolizer-16"); err == nil {
		env = append(env, "ASAN_SYMBOLIZER_PATH="+sym)
	}
	cmd.Env = env
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("asan helper: %v\n%s", err, trimReport(errOut.String()))
	}
	var status, nd uint32
	r := bytes.NewReader(out.Bytes())
	if binary.Read(r, binary.LittleEndian, &status) != nil || binary.Read(r, binary.LittleEndian, &nd) != nil || int(nd) != len(descs) {
		return errors.New("asan helper: malformed reply")
	}
	for _, ds := range descs {
		if _, err := r.Read(descBytes(ds)); err != nil {
			return errors.New("asan helper: malformed reply")
		}
	}
	if status != 0 {
		for _, ds := range descs {
			if msg := ds.errText(); msg != "" {
				return errors.New(msg)
			}
		}
		return errors.New("asan helper: dispatch failed")
	}
	for _, b := range bufs {
		if n, _ := r.Read(b); n != len(b) && len(b) > 0 {
			return errors.New("asan helper: short reply")
		}
	}
	return nil
}

// queryHelper asks lib's helper for the static threadgroup memory and thread limit of each kernel.
func (d *Device) queryHelper(lib *library) ([]uint32, error) {
	cmd := exec.Command(lib.path)
	cmd.Stdin = strings.NewReader("EMUQ")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0")
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("asan helper: %v\n%s", err, errOut.String())
	}
	r := bytes.NewReader(out.Bytes())
	var n uint32
	if binary.Read(r, binary.LittleEndian, &n) != nil {
		return nil, errors.New("asan helper: malformed reply")
	}
	sizes := make([]uint32, 2*n)
	if binary.Read(r, binary.LittleEndian, sizes) != nil {
		return nil, errors.New("asan helper: malformed reply")
	}
	return sizes, nil
}

// trimReport keeps the sanitizer's summary, the first frames and the emulator's fault line.
func trimReport(s string) string {
	var keep []string
	frames := 0
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "==") && strings.Contains(t, "ERROR"), strings.HasPrefix(t, "emu:"),
			strings.HasPrefix(t, "SUMMARY"), strings.HasPrefix(t, "READ of"), strings.HasPrefix(t, "WRITE of"),
			strings.Contains(t, "is located"):
			keep = append(keep, t)
		case strings.HasPrefix(t, "#") && frames < 4:
			keep = append(keep, t)
			frames++
		}
	}
	if len(keep) == 0 {
		return s
	}
	return strings.Join(keep, "\n")
}

// runASan runs the whole command buffer in the helper.
func (c *commandBuffer) runASan() {
	var bufs [][]byte
	ids := map[*buffer]int{}
	var descs []*dispatchDesc
	lib := c.dispatches[0].p.lib
	start := 0
	for i := range c.dispatches {
		r := &c.dispatches[i]
		if r.p.lib != lib {
			// One helper per library: run what came before, then continue with the next library.
			c.flushASan(lib, descs, bufs, c.dispatches[start:i])
			if c.err != nil {
				return
			}
			bufs, descs, ids, lib, start = nil, nil, map[*buffer]int{}, r.p.lib, i
		}
		desc := c.dev.newDesc(r.p)
		desc.Groups, desc.Threads, desc.TGLen = r.groups, r.threads, r.tglen
		for b := range maxBindings {
			switch {
			case r.bytes[b] != nil:
				bufs = append(bufs, append([]byte(nil), r.bytes[b]...))
				desc.Buf[b] = uint64(len(bufs)) << 40
				desc.BufLen[b] = uint64(len(r.bytes[b]))
			case r.bufs[b] != nil:
				bb := r.bufs[b]
				if bb.mem == nil {
					c.fail("buffer(%d) was released", b)
					return
				}
				id, ok := ids[bb]
				if !ok {
					bufs = append(bufs, bb.mem)
					id = len(bufs) - 1
					ids[bb] = id
				}
				desc.Buf[b] = uint64(id+1)<<40 | uint64(r.offs[b])
				desc.BufLen[b] = uint64(len(bb.mem) - r.offs[b])
			}
		}
		descs = append(descs, desc)
	}
	c.flushASan(lib, descs, bufs, c.dispatches[start:])
}

func (c *commandBuffer) flushASan(lib *library, descs []*dispatchDesc, bufs [][]byte, recs []dispatchRec) {
	if len(descs) == 0 {
		return
	}
	// Buffers are read back in place: bufs alias the device buffers' memory (setBytes data are
	// copies), and the helper's reply is copied into them only on success.
	t0 := time.Now()
	err := c.dev.runHelper(lib, descs, bufs)
	dt := time.Since(t0) / time.Duration(len(descs))
	for i := range recs {
		c.record(&recs[i], dt)
	}
	if err != nil {
		c.err = fmt.Errorf("emu: %w: %v", mtl.ErrExecution, err)
	}
}
