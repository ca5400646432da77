package emu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDumpPrepass(t *testing.T) {
	f := os.Getenv("EMU_DUMP")
	if f == "" {
		t.Skip()
	}
	tc := &toolchain{clang: "clang++-16", cache: t.TempDir()}
	src, _ := tc.sources()
	args := []string{"-E", "-x", "c++", "-std=c++17", "-nostdinc", "-I" + filepath.Join(src, "stub"), "-D__METAL_VERSION__=400"}
	args = append(args, strings.Fields(os.Getenv("EMU_FLAGS"))...)
	pre, err := exec.Command("clang++-16", append(args, f)...).CombinedOutput()
	if err != nil {
		t.Fatal(string(pre))
	}
	p, err := prepass(string(pre))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(os.Getenv("EMU_OUT"), []byte(p.cpp), 0o644)
	for _, d := range p.diags {
		t.Log(d)
	}
}
