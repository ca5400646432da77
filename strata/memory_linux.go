package strata

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memLimits are the limits on the memory this process can still take on Linux, each with what
// it leaves: MemAvailable (/proc/meminfo: what the kernel can give without swapping); the
// headroom of RLIMIT_AS (ulimit -v: the limit less the address space in use, VmSize) and of
// RLIMIT_DATA (ulimit -d: the limit less the data segment in use, VmData), from
// /proc/self/status; and the headroom of every memory cgroup the process is in, its own and its
// ancestors' (cgroup v2: memory.max less memory.current; cgroup v1: memory.limit_in_bytes less
// memory.usage_in_bytes), read under /sys/fs/cgroup. A limit that is not set or cannot be read
// is left out.
func memLimits() []memLimit {
	var out []memLimit
	if kb, ok := procField("/proc/meminfo", "MemAvailable:"); ok {
		out = append(out, memLimit{kb << 10, "MemAvailable"})
	}
	for _, r := range []struct {
		res        int
		name, used string
	}{{unix.RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize:"}, {unix.RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData:"}} {
		var lim unix.Rlimit
		if unix.Getrlimit(r.res, &lim) != nil || lim.Cur == unix.RLIM_INFINITY || lim.Cur >= 1<<62 {
			continue
		}
		if kb, ok := procField("/proc/self/status", r.used); ok {
			out = append(out, memLimit{int64(lim.Cur) - kb<<10, fmt.Sprintf("%s of %.0f MiB, %.0f MiB in use", r.name, mib(int64(lim.Cur)), mib(kb<<10))})
		}
	}
	return append(out, cgroupLimits()...)
}

// procField is the value in kB of the line "name N kB" of a /proc file.
func procField(path, name string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name); ok {
			fields := strings.Fields(rest)
			if len(fields) == 2 && fields[1] == "kB" {
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return kb, true
				}
			}
		}
	}
	return 0, false
}

// cgroupRoot is where the cgroup file systems are mounted (a variable for the tests).
var cgroupRoot = "/sys/fs/cgroup"

// cgroupLimits are the headrooms of the memory cgroups of this process (/proc/self/cgroup) and
// of their ancestors that have a limit.
func cgroupLimits() []memLimit {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	var out []memLimit
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, limitFile, usageFile, what string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			dir, limitFile, usageFile, what = cgroupRoot, "memory.max", "memory.current", "cgroup v2 memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"): // v1
			dir, limitFile, usageFile, what = filepath.Join(cgroupRoot, "memory"), "memory.limit_in_bytes", "memory.usage_in_bytes", "cgroup v1 memory.limit_in_bytes"
		default:
			continue
		}
		for p := parts[2]; ; p = filepath.Dir(p) {
			d := filepath.Join(dir, p)
			limit, ok1 := readBytesFile(filepath.Join(d, limitFile))
			used, ok2 := readBytesFile(filepath.Join(d, usageFile))
			if ok1 && ok2 && limit < 1<<62 {
				out = append(out, memLimit{limit - used, fmt.Sprintf("%s of %.0f MiB in %s, %.0f MiB in use", what, mib(limit), d, mib(used))})
			}
			if p == "/" || p == "." || p == "" {
				break
			}
		}
	}
	return out
}

// readBytesFile reads a cgroup file holding a byte count ("max": no limit, not ok).
func readBytesFile(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}
