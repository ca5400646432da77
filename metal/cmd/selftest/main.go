// Command selftest checks the Metal backend on one device in one run and prints one Markdown
// report to paste: the OS, the device and its GPU families, every kernel file compiled with the
// device's compiler, every pipeline the backend can build (each kernel with each function-constant
// specialisation) with its threadgroup memory, every op case of op/optest against its float64
// reference with the default kernels and again with each alternative kernel (the Metal 4
// tensor-op kernels among them), the alternatives that must give another kernel's bits compared
// bitwise, the tensor-op decisions of an M5-class GPU, and on a GPU paired A/B timings of every
// op's kernels (alternating pairs, median and minimum of the command buffers' GPU time), every
// pipeline's maxTotalThreadsPerThreadgroup, the command buffers' GPU times, and the objects
// still live after every backend closed (a leak fails the run). With --validate the command
// reruns itself under Metal's validation layers (MTL_DEBUG_LAYER, MTL_SHADER_VALIDATION,
// OBJC_DEBUG_MISSING_POOLS) and appends the messages they wrote to the report.
//
//	go run ./metal/cmd/selftest                      # Metal on a Mac, else the emulator
//	go run ./metal/cmd/selftest --device emu --json selftest.json
//	go run ./metal/cmd/selftest --validate           # under Metal's validation layers
//
// Rows are (kernel, variant, threadgroup bytes, status, max relative error, ms); --json writes
// them as a JSON list of objects with those keys (null where a row has no such value). A row's
// status is pass, fail, or skip (a tensor-op row on a device without Metal 4, an emulator-only
// equality on a GPU). The exit status is 0 only when no row fails (1 otherwise, 2 when the
// device does not open). The op cases run under package testing (through testing.Main, with the
// command's own flags); its messages, the failures' details among them, go to stderr, the
// report alone to stdout.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/metal/mtl"
)

func main() {
	testing.Init()
	device := flag.String("device", "auto", "auto (the Metal device on a Mac, else the emulator), metal or emu")
	jsonPath := flag.String("json", "", "also write the rows as a JSON list to this file")
	cases := flag.String("cases", "auto", "op cases: all, short (the subset op/optest marks), or auto (all on a GPU, short on the emulator)")
	abN := flag.Int("ab", 11, "timed A/B pairs per kernel variant on a GPU (0: no timing)")
	threads := flag.Int("threads", 0, "emulator threads running threadgroups (0: every core)")
	validate := flag.Bool("validate", false, "rerun under Metal's validation layers (MTL_DEBUG_LAYER=1, MTL_SHADER_VALIDATION=1, OBJC_DEBUG_MISSING_POOLS=YES) and add their messages to the report")
	flag.Usage = func() {
		// testing.Init registers the -test.* flags (the op cases run under package testing);
		// they are not the self-test's options, so the help lists its own only.
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./metal/cmd/selftest [flags]")
		flag.VisitAll(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "test.") {
				return
			}
			fmt.Fprintf(flag.CommandLine.Output(), "  -%s\n    \t%s (default %q)\n", f.Name, f.Usage, f.DefValue)
		})
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "selftest: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *jsonPath != "" {
		// A folder that cannot take the file fails now, not after the whole run; the file
		// itself is written whole at the end (an existing one is kept until then).
		f, err := os.CreateTemp(filepath.Dir(*jsonPath), ".selftest-probe-*")
		if err == nil {
			f.Close()
			err = os.Remove(f.Name())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "selftest: --json %s: %v\n", *jsonPath, err)
			os.Exit(2)
		}
	}
	if *validate && os.Getenv(validatedEnv) == "" {
		os.Exit(runValidated(os.Stdout))
	}
	dev, err := openDevice(*device, *threads)
	if err != nil {
		fmt.Fprintln(os.Stderr, "selftest:", err)
		os.Exit(2)
	}
	st := &selftest{dev: dev, jsonPath: *jsonPath, abN: *abN, report: os.Stdout, validated: os.Getenv(validatedEnv) != ""}
	st.emulated = isEmulated(dev)
	switch *cases {
	case "auto":
		st.short = st.emulated
	case "short":
		st.short = true
	case "all":
	default:
		fmt.Fprintf(os.Stderr, "selftest: --cases %q: want auto, short or all\n", *cases)
		os.Exit(2)
	}
	if *abN < 0 {
		fmt.Fprintf(os.Stderr, "selftest: --ab %d: want a count >= 0\n", *abN)
		os.Exit(2)
	}
	// testing writes its messages to os.Stdout: send them to stderr, keep stdout for the report.
	os.Stdout = os.Stderr
	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "selftest", F: st.run}}, nil, nil)
}

// openDevice opens the device kind names.
func openDevice(kind string, threads int) (mtl.Device, error) {
	if kind == "auto" {
		kind = "emu"
		if runtime.GOOS == "darwin" {
			kind = "metal"
		}
	}
	switch kind {
	case "metal":
		return metal.SystemDevice()
	case "emu":
		return emu.Open(emu.Options{Threads: threads})
	}
	return nil, fmt.Errorf("--device %q: want auto, metal or emu", kind)
}

// isEmulated reports a device that emulates Metal on the CPU.
func isEmulated(dev mtl.Device) bool {
	e, ok := dev.(interface{ Emulated() bool })
	return ok && e.Emulated()
}
