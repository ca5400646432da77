package blas

import (
	"runtime"
	"strings"
	"testing"
)

// A user's OPENBLAS_CORETYPE naming kernels the CPU cannot run is refused before the library
// loads (it would die of SIGILL); values the CPU can run, unknown ones and "" pass.
func TestCheckUserCoreType(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the check applies on amd64 only")
	}
	for _, tc := range []struct {
		v            string
		avx512, avx2 bool
		refused      bool
		mentions     string
	}{
		{"", false, false, false, ""},
		{"SkylakeX", true, true, false, ""},
		{"SkylakeX", false, true, true, "AVX-512"},
		{"skylakex", false, true, true, "AVX-512"},
		{"COOPERLAKE", false, true, true, "AVX-512"},
		{"SapphireRapids", false, false, true, "AVX-512"},
		{"Haswell", false, true, false, ""},
		{"Haswell", false, false, true, "AVX2 and FMA"},
		{"Zen", false, false, true, "AVX2 and FMA"},
		{"Prescott", false, false, false, ""},
		{"NoSuchCore", false, false, false, ""},
	} {
		err := checkUserCoreType(tc.v, tc.avx512, tc.avx2)
		if (err != nil) != tc.refused {
			t.Errorf("%q avx512=%t avx2=%t: err %v, want refused=%t", tc.v, tc.avx512, tc.avx2, err, tc.refused)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), tc.mentions) || !strings.Contains(err.Error(), "OPENBLAS_CORETYPE="+tc.v)) {
			t.Errorf("%q: error %q should name the value and %s", tc.v, err, tc.mentions)
		}
	}
}
