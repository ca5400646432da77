package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/stratakernels/strata/strata"
)

// runInspect is --inspect: it checks the checkpoint as loading would (strata.Inspect: config.json,
// the shard index, every tensor header, the PLE buffers) without loading it and prints the
// summary, with the compute line: what the mode of --compute (default f32) would run on this
// CPU for the checkpoint's weight formats. Only --model, --preset, --compute and -v may
// accompany it.
func (o *options) runInspect(ctx context.Context) error {
	compute := o.model.compute
	var other []string
	o.fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "inspect", "model", "preset", "compute", "v":
		default:
			other = append(other, "--"+f.Name)
		}
	})
	if len(other) > 0 {
		sort.Strings(other)
		return fmt.Errorf("--inspect takes only --model (or --preset) and --compute: drop %s", strings.Join(other, ", "))
	}
	dir, err := o.modelDir(ctx)
	if err != nil {
		return err
	}
	if strings.HasSuffix(strings.ToLower(dir), ".gguf") {
		return inspectGGUF(dir, compute)
	}
	info, err := strata.Inspect(dir)
	if err != nil {
		return err
	}
	printInfo(os.Stdout, info)
	fmt.Printf("%-10s %s selected; on this CPU: %s\n", "compute", compute, strata.ComputeKernels())
	if len(info.Truncated) > 0 {
		return fmt.Errorf("%s: %s cut short (the headers agree with the model; loading needs the data)",
			dir, plural(len(info.Truncated), "shard"))
	}
	return nil
}

// inspectGGUF is --inspect of a GGUF file (headers only: header-only copies of published files
// too): its architecture, tensors by class and type, tokenizer, then the summary of what loading
// would find, or why strata refuses the file (an error, after the summary).
func inspectGGUF(path, compute string) error {
	g, err := strata.InspectGGUF(path)
	if err != nil {
		return err
	}
	line := func(key, format string, args ...any) { fmt.Printf("%-10s %s\n", key, fmt.Sprintf(format, args...)) }
	name := ""
	if g.Name != "" {
		name = fmt.Sprintf(" (%s)", g.Name)
	}
	line("GGUF", "%s, llama.cpp architecture %s%s, %s, %d metadata keys, %d tensors, %s",
		homeRel(g.Path), g.Architecture, name, plural(g.Parts, "file"), g.Metadata, g.Tensors, size(g.TensorBytes))
	if g.DataPresent < g.DataSize {
		line("data", "%s of the %s of tensor data present: a header-only copy or a file cut short; loading refuses it",
			size(g.DataPresent), size(g.DataSize))
	}
	for i, t := range g.Types {
		key := ""
		if i == 0 {
			key = "types"
		}
		line(key, "%-17s %-7s %5d tensors, %s", t.Class, t.Type, t.Tensors, size(t.Bytes))
	}
	if g.Tokenizer != "" {
		line("tokenizer", "%s", g.Tokenizer)
	} else {
		line("tokenizer", "none in the file (give --tokenizer FILE or token ids)")
	}
	if g.Model == nil {
		line("refused", "%s", g.Refused)
		return fmt.Errorf("%s: strata would refuse this file (see above)", path)
	}
	printInfo(os.Stdout, g.Model)
	fmt.Printf("%-10s %s selected; on this CPU: %s\n", "compute", compute, strata.ComputeKernels())
	return nil
}

// printInfo writes the summary of an inspected checkpoint: its shapes, then how its weights
// are stored and what the check found.
func printInfo(w io.Writer, in *strata.ModelInfo) {
	line := func(key, format string, args ...any) { fmt.Fprintf(w, "%-10s %s\n", key, fmt.Sprintf(format, args...)) }
	printShapes(line, in)
	printStorage(line, in)
}

// infoLine writes one line of a summary: a key in a column of 10, then the text.
type infoLine func(key, format string, args ...any)

// printShapes writes the model's lines: family, layers, widths, heads, experts and PLE.
func printShapes(line infoLine, in *strata.ModelInfo) {
	line("model", "%s (model_type %s, %s)", in.Arch, in.ModelType, strings.Join(in.Architectures, ", "))
	line("", "%s", homeRel(in.Dir))
	var mixers []string
	if in.GDNLayers > 0 {
		mixers = append(mixers, fmt.Sprintf("%d Gated DeltaNet", in.GDNLayers))
	}
	if in.AttentionLayers > 0 {
		mixers = append(mixers, fmt.Sprintf("%d gated attention", in.AttentionLayers))
	}
	if in.QSALayers > 0 {
		mixers = append(mixers, fmt.Sprintf("%d QSA attention (budget %d tokens)", in.QSALayers, in.QSABudget))
	}
	line("layers", "%d: %s", in.Layers, strings.Join(mixers, " + "))
	line("width", "D %d, %s, vocab %d, max positions %d", in.D, plural(in.Streams, "residual stream"), in.Vocab, in.MaxPositions)
	line("attention", "Hq %d / Hkv %d x head_dim %d, rotary %d", in.Hq, in.Hkv, in.HeadDim, in.RotaryDim)
	line("GDN", "Hk %d / Hv %d, dk %d / dv %d", in.Hk, in.Hv, in.Dk, in.Dv)
	moe := fmt.Sprintf("%d experts, top-%d, intermediate %d, shared expert %d", in.Experts, in.TopK, in.MoEI, in.SharedI)
	if in.DenseLayers > 0 {
		moe += fmt.Sprintf("; %d dense MLP layers (intermediate %d)", in.DenseLayers, in.DenseI)
	}
	line("MoE", "%s", moe)
	if len(in.PLELayers) > 0 {
		table := "one n-gram table per layer"
		if in.NGramShards > 0 {
			table = fmt.Sprintf("n-gram table in %d shards", in.NGramShards)
		}
		buffers := "hash buffers not stored (derived from config.json)"
		if in.PLEBuffersChecked > 0 {
			buffers = "hash buffers checked against config.json"
		}
		at := "layer"
		if len(in.PLELayers) > 1 {
			at = "layers"
		}
		line("PLE", "at %s %s; %s; %s", at, joinInts(in.PLELayers), table, buffers)
	}
}

// printStorage writes the weights' lines (dtypes, quantization, resident bytes, tensors,
// norms, skipped groups, missing data) and the check's verdict.
func printStorage(line infoLine, in *strata.ModelInfo) {
	var dts []string
	for _, d := range in.WeightDTypes {
		dts = append(dts, fmt.Sprintf("%s %d tensors, %s", d.DType, d.Tensors, size(d.Bytes)))
	}
	line("weights", "%s", strings.Join(dts, "; "))
	if len(in.Quantized) > 0 {
		var qs []string
		for _, q := range in.Quantized {
			qs = append(qs, fmt.Sprintf("%s: %s, %s", q.Format, plural(q.Modules, "module"), size(q.Bytes)))
		}
		line("quantized", "%s: %s", in.Quantization, strings.Join(qs, "; "))
	}
	line("resident", "%s of weights in memory once loaded", size(in.ResidentBytes))
	experts := "experts stored one by one"
	switch {
	case in.MLX:
		experts = "MLX conversion (experts stacked under switch_mlp, conv1d [C, K, 1])"
	case in.FusedExperts:
		experts = "experts fused"
	}
	gguf := strings.HasPrefix(in.Layout, "GGUF")
	if gguf {
		line("tensors", "%d in %s, %s; %s", in.Tensors, plural(in.Shards, "file"), size(in.TensorBytes), in.Layout)
	} else {
		line("tensors", "%d in %s, %s; prefix %s, %s", in.Tensors, plural(in.Shards, "shard"), size(in.TensorBytes), in.Prefix, experts)
	}
	switch {
	case in.Gains != "":
		line("norms", "zero-centred gains %s", in.Gains)
	case in.ShiftedGains && !gguf:
		line("norms", "zero-centred gains stored as 1 + w (this layout's convention), read as stored - 1")
	}
	for i, s := range in.Skipped {
		key := ""
		if i == 0 {
			key = "skipped"
		}
		line(key, "%s (%d tensors, %s): %s", s.Group, s.Tensors, size(s.Bytes), s.Reason)
	}
	if len(in.Truncated) > 0 {
		var present, want int64
		for _, t := range in.Truncated {
			present += t.Present
			want += t.Size
		}
		line("data", "%s truncated: %s of their %s present, %d bytes missing (headers complete; loading needs the data), e.g. %s",
			plural(len(in.Truncated), "shard"), size(present), size(want), want-present, in.Truncated[0].File)
	}
	if len(in.Truncated) > 0 {
		line("check", "failed: config.json, the shard index and every tensor header agree with the model, but the data is incomplete")
		return
	}
	if gguf {
		line("check", "ok: the metadata and every tensor of the table agree with the model (headers only: the data is not read)")
		return
	}
	line("check", "ok: config.json, the shard index and every tensor header agree with the model")
}
