package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratakernels/strata/strata"
)

// checkStateFlags refuses combinations of the state and prompt-cache flags that mean nothing,
// and a --save-state file whose directory does not exist (before a long prefill, not after).
func (o *options) checkStateFlags() error {
	save, load, cacheDir, bench := o.state.save, o.state.load, o.state.cacheDir, o.bench.cache
	for _, name := range []string{"prompt-cache-bytes", "prompt-cache-every"} {
		if o.set(name) && cacheDir == "" && !bench {
			return fmt.Errorf("--%s applies with --prompt-cache DIR (or --bench-cache)", name)
		}
	}
	switch {
	case o.state.cacheBytes <= 0:
		return fmt.Errorf("--prompt-cache-bytes %d: must be > 0", o.state.cacheBytes)
	case o.state.cacheEvery <= 0:
		return fmt.Errorf("--prompt-cache-every %d: must be > 0", o.state.cacheEvery)
	case load != "" && cacheDir != "":
		return fmt.Errorf("give --load-state or --prompt-cache, not both (the prompt cache finds the state a prompt continues itself)")
	case o.prefill.chunk > 0 && cacheDir != "":
		return fmt.Errorf("--chunk does not apply with --prompt-cache (the cache prefills the prompt's rest in steps of --prompt-cache-every)")
	case bench && (save != "" || load != ""):
		return fmt.Errorf("--bench-cache takes no --save-state or --load-state")
	}
	if load != "" {
		// A state file's header and data are checked after the model loads (LoadStateFile);
		// what can be told without it is told now.
		switch fi, err := os.Stat(load); {
		case err != nil:
			return fmt.Errorf("--load-state %s: %v", load, err)
		case fi.IsDir():
			return fmt.Errorf("--load-state %s: is a directory, not a state file", load)
		case !fi.Mode().IsRegular():
			return fmt.Errorf("--load-state %s: is not a regular file (%s), not a state file", load, fi.Mode().Type())
		}
	}
	if save != "" {
		return checkOutputFile("save-state", save)
	}
	return nil
}

// checkOutputFile refuses, before a long prefill rather than after it, an output file of flag
// --name that could not be written: a directory that is missing, not a directory or not
// writable (a probe file is created in it and removed), or a path that is a directory. An
// existing device or pipe (/dev/null, /dev/stdout) is written in place (strata.WriteFile), so
// its directory need not be writable.
func checkOutputFile(name, path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return fmt.Errorf("--%s %s: its directory does not exist", name, path)
	case err != nil:
		return fmt.Errorf("--%s %s: %v", name, path, err)
	case !fi.IsDir():
		return fmt.Errorf("--%s %s: %s is not a directory", name, path, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("--%s %s: is a directory", name, path)
	} else if err == nil && !fi.Mode().IsRegular() {
		return nil
	}
	probe, err := os.CreateTemp(dir, ".strata-probe-*")
	if err != nil {
		return fmt.Errorf("--%s %s: its directory is not writable: %v", name, path, err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// checkMLXLMFlags refuses the --mlx-lm-* flags without --save-mlx-lm-cache, and a format, dtype
// or file name the export would refuse, before a long prefill rather than after it.
func (o *options) checkMLXLMFlags() error {
	path, opts := o.export.path, o.export.opts
	if path == "" {
		for _, name := range []string{"mlx-lm-format", "mlx-lm-dtype", "mlx-lm-model"} {
			if o.set(name) {
				return fmt.Errorf("--%s applies with --save-mlx-lm-cache FILE", name)
			}
		}
		return nil
	}
	switch {
	case o.bench.cache:
		return fmt.Errorf("--bench-cache takes no --save-mlx-lm-cache")
	case !strings.HasSuffix(path, ".safetensors"):
		return fmt.Errorf("--save-mlx-lm-cache %s: the name must end in .safetensors (mlx reads a prompt cache by that extension)", path)
	case opts.Format != strata.MLXLMFormatNew && opts.Format != strata.MLXLMFormatLegacy:
		return fmt.Errorf("--mlx-lm-format %q: new or legacy", opts.Format)
	case opts.DType != "" && opts.DType != "bfloat16" && opts.DType != "float16" && opts.DType != "float32":
		return fmt.Errorf("--mlx-lm-dtype %q: bfloat16, float16 or float32", opts.DType)
	case o.set("mlx-lm-model") && opts.Model == "":
		return fmt.Errorf("--mlx-lm-model is empty")
	}
	return checkOutputFile("save-mlx-lm-cache", path)
}

// cacheLine is the CLI's report of one prompt-cache prefill:
//
//	cache     reused R of N tokens (WHERE; checkpoints; total; what the cache holds)
func cacheLine(res *strata.PromptCacheResult, budget int64, dir string) string {
	where := "miss"
	switch res.From {
	case "memory", "disk":
		where = fmt.Sprintf("checkpoint from %s, restored in %v", res.From, res.Restore.Round(time.Millisecond))
	case "session":
		where = "the session's own state"
	}
	s := fmt.Sprintf("cache     reused %d of %d tokens (%s; %s taken, %.1f MiB in %v",
		res.Reused, res.Tokens, where, plural(res.Checkpoints, "checkpoint"), mibOf(res.CheckpointBytes), res.CheckpointTime.Round(time.Millisecond))
	if res.Skipped > 0 {
		s += fmt.Sprintf(", %d over the budget", res.Skipped)
	}
	s += fmt.Sprintf("; total %v; memory %s, %.1f of %.1f MiB", res.Total.Round(time.Millisecond),
		plural(res.MemoryCheckpoints, "checkpoint"), mibOf(res.MemoryBytes), mibOf(budget))
	if dir != "" {
		s += fmt.Sprintf("; %s %s, %.1f of %.1f MiB", homeRel(dir), plural(res.DiskCheckpoints, "file"), mibOf(res.DiskBytes), mibOf(budget))
	}
	return s + ")"
}

// pathFlag is a file flag's name (without the dashes) and its value.
type pathFlag struct{ name, path string }

// checkSamePaths refuses, before anything is loaded, two output flags naming one file (the
// second would replace the first) and an output naming an input file (the run would replace
// what it reads). Two paths name one file when they are the same once made absolute and clean,
// or when both exist and are the same file (a link, another spelling). Unset flags are skipped.
func checkSamePaths(outputs, inputs []pathFlag) error {
	for i, o := range outputs {
		if o.path == "" {
			continue
		}
		for _, other := range outputs[i+1:] {
			if other.path != "" && samePath(o.path, other.path) {
				return fmt.Errorf("--%s and --%s name the same file %s (the second would replace the first)", o.name, other.name, o.path)
			}
		}
		for _, in := range inputs {
			if in.path != "" && samePath(o.path, in.path) {
				return fmt.Errorf("--%s %s is the file --%s reads: the run would replace its own input", o.name, o.path, in.name)
			}
			if in.path != "" && insideDir(o.path, in.path) {
				return fmt.Errorf("--%s %s is inside the folder --%s %s reads: the run would replace part of its own input", o.name, o.path, in.name, in.path)
			}
		}
	}
	return nil
}

// insideDir reports whether path lies in the existing directory dir (a checkpoint folder).
func insideDir(path, dir string) bool {
	if pst, err := os.Stat(filepath.Dir(path)); err != nil || !pst.IsDir() {
		return false // reported by the output's own check
	}
	return withinDir(filepath.Dir(path), dir)
}

// withinDir reports whether path is the existing directory dir or lies under it, whether or not
// path exists yet (a prompt-cache folder is created on first use).
func withinDir(path, dir string) bool {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return false
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	for {
		if samePath(p, dir) {
			return true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		p = parent
	}
}

// samePath reports whether a and b name one file: the same absolute clean path, or two
// existing paths of the same file (os.SameFile).
func samePath(a, b string) bool {
	if aa, err := filepath.Abs(a); err == nil {
		if bb, err := filepath.Abs(b); err == nil && aa == bb {
			return true
		}
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
