package metal

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/stratakernels/strata/metal/mtl"
)

// headerStructs parses kernels/params.h: struct name -> fields (MSL type, name) in order.
func headerStructs(t *testing.T) map[string][][2]string {
	t.Helper()
	src, err := Source(ParamsHeader)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][2]string{}
	for _, m := range regexp.MustCompile(`(?ms)^struct (\w+) \{\n(.*?)^\};`).FindAllStringSubmatch(src, -1) {
		var fields [][2]string
		for _, f := range regexp.MustCompile(`(?m)^\s+(\w+)\s+(\w+);`).FindAllStringSubmatch(m[2], -1) {
			fields = append(fields, [2]string{f[1], f[2]})
		}
		out[m[1]] = fields
	}
	if len(out) < 20 {
		t.Fatalf("parsed only %d structs from %s", len(out), ParamsHeader)
	}
	return out
}

// TestParamsMatchHeader: every params struct of kernels/params.h has a Go twin with the same
// fields in the same order (MSL snake_case names in Go CamelCase, uint as int or bool, float as
// float32), no twin lacks its struct, and on the emulator every MSL field sits at offset 4*i of
// a struct of 4*n bytes, which is how paramBytes lays the twin out.
func TestParamsMatchHeader(t *testing.T) {
	hdr := headerStructs(t)
	for name := range paramTwins {
		if _, ok := hdr[name]; !ok {
			t.Errorf("Go twin of %s has no struct in %s", name, ParamsHeader)
		}
	}
	var names []string
	for name, fields := range hdr {
		names = append(names, name)
		twin, ok := paramTwins[name]
		if !ok {
			t.Errorf("%s of %s has no Go twin in paramTwins", name, ParamsHeader)
			continue
		}
		rt := reflect.TypeOf(twin)
		if rt.NumField() != len(fields) {
			t.Errorf("%s: %d MSL fields, Go twin %s has %d", name, len(fields), rt.Name(), rt.NumField())
			continue
		}
		for i, f := range fields {
			gf := rt.Field(i)
			if !strings.EqualFold(strings.ReplaceAll(f[1], "_", ""), gf.Name) {
				t.Errorf("%s field %d: MSL %s, Go %s", name, i, f[1], gf.Name)
			}
			ok := (f[0] == "float" && gf.Type.Kind() == reflect.Float32) ||
				((f[0] == "uint" || f[0] == "int") && (gf.Type.Kind() == reflect.Int || gf.Type.Kind() == reflect.Bool))
			if !ok {
				t.Errorf("%s.%s: MSL %s, Go %v", name, f[1], f[0], gf.Type)
			}
		}
		if n := len(paramBytes(reflect.Zero(rt).Interface())); n != 4*len(fields) {
			t.Errorf("%s: paramBytes gives %d bytes, want %d", name, n, 4*len(fields))
		}
	}
	sort.Strings(names)

	// The MSL layout, measured by a kernel compiled with the header: per struct its size, then
	// each field's byte offset.
	var want []uint32
	for _, name := range names {
		want = append(want, uint32(4*len(hdr[name])))
		for k := range hdr[name] {
			want = append(want, uint32(4*k))
		}
	}
	body := layoutKernel(names, hdr)
	b := testBackend(t)
	lib, err := b.dev.NewLibrary("params_layout.metal", CompileSource("params_layout.metal", body), CompileOptions("params_layout.metal"))
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := lib.Pipeline("params_layout", nil)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := b.dev.NewBuffer(4 * len(want))
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Release()
	runOne(t, b.dev, pipe, buf)
	got := unsafe.Slice((*uint32)(unsafe.Pointer(&buf.Contents()[0])), len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("params layout value %d: MSL %d, want %d (the structs' sizes and offsets must be 4 bytes per field)", i, got[i], want[i])
		}
	}
	t.Logf("%d params structs, %d sizes and offsets checked on the emulator", len(names), len(want))
}

// layoutKernel is an MSL kernel writing, per struct of names, sizeof and every field's offset.
func layoutKernel(names []string, hdr map[string][][2]string) string {
	var src strings.Builder
	src.WriteString("kernel void params_layout(device uint* out [[buffer(0)]], uint tid [[thread_position_in_grid]]) {\n")
	src.WriteString("    if (tid != 0) {\n        return;\n    }\n    uint i = 0;\n")
	for _, name := range names {
		fmt.Fprintf(&src, "    {\n        %s v;\n        out[i++] = uint(sizeof(v));\n", name)
		for _, f := range hdr[name] {
			fmt.Fprintf(&src, "        out[i++] = uint((thread char*)&v.%s - (thread char*)&v);\n", f[1])
		}
		src.WriteString("    }\n")
	}
	src.WriteString("}\n")
	return src.String()
}

// runOne dispatches one thread of pipe with buf at index 0 and waits.
func runOne(t *testing.T, dev mtl.Device, pipe mtl.Pipeline, buf mtl.Buffer) {
	t.Helper()
	cb, err := dev.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cb.ComputeEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.SetPipeline(pipe)
	enc.SetBuffer(buf, 0, 0)
	enc.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{1, 1, 1})
	enc.EndEncoding()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
}
