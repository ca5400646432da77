// Command ab runs two variants of a Metal kernel on the same inputs and compares them: the
// baseline (the embedded kernel files, the host's default variant) against a candidate (a
// replacement .metal file for the op's kernel file, and/or another variant of the op chosen with
// Prefer). Outputs must agree bitwise, or within -tol (max |A - B| / max |A|) for variants that
// sum in another order (qmv_affine, qmm_affine_tensor on a GPU, gdn_scan_chunk, the attention
// variants). On Apple hardware it also times the two in paired,
// alternating order (A B B A ...) and reports the median and minimum over -n samples of the
// command buffers' GPU time and of the wall time; on the MSL emulator it only compares (emulator
// time says nothing about GPU speed).
//
// Shapes are the real model's (Qwen3.8-Flash-Next) at -T new tokens after -pos0 cached ones;
// each sample runs the op -layers times on different inputs (one per layer). Wall times include
// the host-slice wrappers' uploads into shared buffers and read-backs, as a prefill pays them
// for its activations only once; compare variants, not absolute numbers.
//
//	go run ./metal/cmd/ab -op moe_comb -prefer moe_comb -T 512
//	go run ./metal/cmd/ab -op gdn_scan -candidate gdn_new.metal -T 512 -layers 4 -n 21
//	go run ./metal/cmd/ab -op qgemm -bits 4 -group 64 -prefer qmm_affine_tensor -T 512 -tol 1e-5
//	go run ./metal/cmd/ab -op qgemm -candidate quant_tensor_new.metal -file quant_tensor.metal -prefer qmm_affine_tensor -tol 1e-5
//	go run ./metal/cmd/ab -op fpgemm -prefer qmv_fp -T 4 -tol 1e-5
//	go run ./metal/cmd/ab -op ggmlgemm -prefer qmv_gg -T 4 -tol 1e-5
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/stratakernels/strata/emu"
	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/metal/internal/abcase"
	"github.com/stratakernels/strata/metal/mtl"
)

func main() {
	opName := flag.String("op", "moe_comb", "op to compare: "+strings.Join(abcase.Ops(), ", "))
	candidate := flag.String("candidate", "", "candidate .metal file replacing the op's kernel file in variant B")
	file := flag.String("file", "", "kernel file the candidate replaces (default: the op's, e.g. quant.metal for qgemm)")
	prefer := flag.String("prefer", "", "kernel variant B runs the op with (metal.Backend.Prefer; qgemm: qmm_affine, qmv_affine, qmm_affine_tensor; fpgemm: qmm_fp, qmv_fp, qmm_fp_tensor; ggmlgemm: qmm_gg, qmv_gg, qmm_gg_tensor)")
	tol := flag.Float64("tol", 0, "largest max|A-B|/max|A| accepted (0: bitwise)")
	bits := flag.Int("bits", abcase.DefaultQuant.Bits, "qgemm: bits per code (2, 3, 4, 5, 6, 8)")
	group := flag.Int("group", abcase.DefaultQuant.Group, "qgemm: group size (32, 64, 128)")
	T := flag.Int("T", 128, "new tokens")
	pos0 := flag.Int("pos0", 0, "cached tokens before them (attention)")
	layers := flag.Int("layers", 1, "op calls per sample, each on its own inputs")
	n := flag.Int("n", 11, "timed samples per variant (Apple hardware only)")
	device := flag.String("device", "auto", "auto (Metal on darwin, else the emulator), metal or emu")
	flag.Parse()
	q := abcase.Quant{Bits: *bits, Group: *group}
	if err := run(*opName, *candidate, *file, *prefer, *tol, q, *T, *pos0, *layers, *n, *device); err != nil {
		fmt.Fprintln(os.Stderr, "ab:", err)
		os.Exit(1)
	}
}

func openDevice(kind string) (mtl.Device, bool, error) {
	if kind == "auto" {
		kind = "emu"
		if runtime.GOOS == "darwin" {
			kind = "metal"
		}
	}
	switch kind {
	case "metal":
		d, err := metal.SystemDevice()
		return d, true, err
	case "emu":
		d, err := emu.Open(emu.Options{})
		return d, false, err
	}
	return nil, false, fmt.Errorf("unknown device %q", kind)
}

func run(opName, candidate, file, prefer string, tol float64, q abcase.Quant, T, pos0, layers, n int, device string) error {
	opFile, ok := abcase.Files[opName]
	if !ok {
		return fmt.Errorf("unknown op %q (have %v)", opName, abcase.Ops())
	}
	if file == "" {
		file = opFile
	}
	if candidate == "" && prefer == "" {
		return errors.New("give -candidate and/or -prefer: variant B must differ from the baseline")
	}
	if T <= 0 || pos0 < 0 || layers <= 0 || n <= 0 {
		return fmt.Errorf("bad sizes T=%d pos0=%d layers=%d n=%d", T, pos0, layers, n)
	}
	dev, timed, err := openDevice(device)
	if err != nil {
		return err
	}
	defer dev.Close()
	a, err := metal.New(dev)
	if err != nil {
		return err
	}
	b, err := metal.New(dev)
	if err != nil {
		return err
	}
	if candidate != "" {
		src, err := os.ReadFile(candidate)
		if err != nil {
			return err
		}
		if err := b.SetSource(file, string(src)); err != nil {
			return err
		}
	}
	if prefer != "" {
		if err := b.Prefer(abcase.PreferOp(opName), prefer); err != nil {
			return err
		}
	}
	calls := make([]abcase.Call, layers)
	for l := range calls {
		if calls[l], err = abcase.NewCallQuant(opName, q, T, pos0, uint64(l+1)); err != nil {
			return err
		}
	}
	same := true
	for l, c := range calls {
		oa, _, err := c(a)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		ob, _, err := c(b)
		if err != nil {
			return fmt.Errorf("candidate: %w", err)
		}
		if i, d, rel := abcase.Diff(oa, ob); i >= 0 {
			fmt.Printf("layer %d: outputs differ first at element %d (max |A-B| = %g, %.3g of max |A|)\n", l, i, d, rel)
			if !(rel <= tol) {
				same = false
			}
		}
	}
	fmt.Printf("device: %s\nop %s, T=%d pos0=%d layers=%d\nA: %v\nB: %v\n", dev.Name(), opName, T, pos0, layers, a.Variants(), b.Variants())
	if same {
		if tol > 0 {
			fmt.Printf("outputs agree within %g\n", tol)
		} else {
			fmt.Println("outputs bitwise equal")
		}
	}
	if !timed {
		fmt.Println("emulator: no timing")
		if !same {
			return errors.New("variants disagree")
		}
		return nil
	}
	sa, sb, err := abcase.Paired(a, b, calls, n)
	if err != nil {
		return err
	}
	for _, side := range []struct {
		name string
		s    abcase.Sample
	}{{"A", sa}, {"B", sb}} {
		wm, wmin := abcase.Stats(side.s.Wall)
		gm, gmin := abcase.Stats(side.s.Device)
		fmt.Printf("%s: GPU median %v min %v; wall median %v min %v\n", side.name, gm, gmin, wm, wmin)
	}
	ga, _ := abcase.Stats(sa.Device)
	gb, _ := abcase.Stats(sb.Device)
	fmt.Printf("B/A GPU median %.3f\n", float64(gb)/float64(ga))
	if !same {
		return errors.New("variants disagree")
	}
	return nil
}
