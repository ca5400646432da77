package blas

import (
	"fmt"
	"os"
	"strings"
)

// cpuKey describes this CPU for the speed cache: /proc/cpuinfo's identification of the first
// processor (vendor, family, model, stepping and model name on x86; implementer, part, variant
// and revision on arm64) and the SIMD features the kernels choose by.
func cpuKey() string {
	var id []string
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		fields := []string{"vendor_id", "cpu family", "model", "model name", "stepping",
			"CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision"}
		seen := map[string]bool{}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				if strings.TrimSpace(line) == "" && len(seen) > 0 {
					break // the end of the first processor's block
				}
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			for _, f := range fields {
				if k == f && !seen[k] {
					seen[k] = true
					id = append(id, k+"="+v)
				}
			}
		}
	}
	return strings.Join(id, ";") + " | " + cpuFeatureKey(simdFeatures())
}

// libKey identifies the loaded OpenBLAS file for the speed cache: its path as mapped into the
// process (after the alternatives symlinks), size and modification time, so that another build
// of the same version is measured again.
func libKey() string {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return "maps unreadable"
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[len(f)-1], "libopenblas") {
			continue
		}
		p := f[len(f)-1]
		st, err := os.Stat(p)
		if err != nil {
			return p
		}
		return fmt.Sprintf("%s %d %d", p, st.Size(), st.ModTime().UnixNano())
	}
	return "not mapped"
}
