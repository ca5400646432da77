package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/stratakernels/strata/strata"
)

// runPrefill is the main job: the prompt (textIDs, or the token-id flags, or the generated
// model's default prompt) is checked against the checkpoint's headers, the model loaded, the
// prompt prefilled in the calls of --chunk (through the prompt cache with --prompt-cache), the
// figures and the top-5 printed, and the state, the mlx-lm cache and the logits saved.
func (o *options) runPrefill(ctx context.Context, dev *strata.Device, textIDs []int32) error {
	dir, tokens, err := o.prompt(ctx, textIDs)
	if err != nil {
		return err
	}
	m, loadTime, err := o.load(dev, dir)
	if err != nil {
		return err
	}
	defer m.Close()
	if o.export.path != "" {
		if _, err := m.MLXLMModel(); err != nil {
			return fmt.Errorf("--save-mlx-lm-cache: %w", err)
		}
	}
	sess, held, err := o.newSession(m, len(tokens))
	if err != nil {
		return err
	}
	defer sess.Close()
	fmt.Printf("backend   %s\n", dev.Backend())
	fmt.Printf("kernels   %s; compute %s\n", dev.Kernels(), m.Compute())
	fmt.Printf("model     %s\n", m.Describe())
	fmt.Printf("          %s (loaded in %v)\n", homeRel(dir), loadTime.Round(time.Millisecond))
	if err := o.loadState(sess); err != nil {
		return err
	}
	o.printPrompt(len(tokens), held)
	res, err := o.prefillAll(ctx, m, sess, tokens)
	if err != nil {
		return err
	}
	o.report(dev, sess, res)
	return o.save(m, sess, res)
}

// prompt resolves the checkpoint and the prompt's token ids, and checks the ids against the
// checkpoint's vocabulary and --max-context before any weight is loaded (reading its headers
// costs little next to loading a release).
func (o *options) prompt(ctx context.Context, textIDs []int32) (dir string, tokens []int32, err error) {
	if dir, err = o.modelDir(ctx); err != nil {
		return "", nil, err
	}
	info, err := strata.Inspect(dir)
	if err != nil {
		return "", nil, err
	}
	if err := o.text.checkVocab(info.Vocab); err != nil {
		return "", nil, err
	}
	tokens = textIDs
	if tokens == nil {
		if tokens, err = promptTokens(o.ids, o.model.dir == "", info.Vocab); err != nil {
			return "", nil, err
		}
	}
	for i, id := range tokens {
		if id < 0 || int(id) >= info.Vocab {
			return "", nil, fmt.Errorf("token id %d (prompt index %d) is outside the model's vocabulary [0, %d)", id, i, info.Vocab)
		}
	}
	if capacity := o.prefill.maxCtx; capacity > 0 && len(tokens) > capacity {
		return "", nil, fmt.Errorf("--max-context %d: the prompt has %d tokens; give at least %d, or leave the flag out", capacity, len(tokens), len(tokens))
	}
	if len(tokens) > maxPromptTokens {
		return "", nil, fmt.Errorf("prompt of %d tokens: at most %d (a session's largest context)", len(tokens), maxPromptTokens)
	}
	return dir, tokens, nil
}

// load loads the model in dir with --widen-budget and --compute, with a progress bar on stderr
// for checkpoints of 256 MiB and more.
func (o *options) load(dev *strata.Device, dir string) (*strata.Model, time.Duration, error) {
	t0 := time.Now()
	var bar *progressbar.ProgressBar
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{WidenBudget: o.model.widen, Compute: o.model.compute, Progress: func(done, total int64, name string) {
		if total < 256<<20 { // small checkpoints load in a blink
			return
		}
		if bar == nil {
			bar = progressbar.DefaultBytes(total, "loading")
		}
		bar.Set64(done)
	}})
	if err != nil {
		return nil, 0, err
	}
	if bar != nil {
		bar.Finish()
	}
	return m, time.Since(t0), nil
}

// newSession makes the session for n prompt tokens after the held tokens of --load-state: of
// --max-context tokens, else of all of them (at least 4096).
func (o *options) newSession(m *strata.Model, n int) (sess *strata.Session, held int, err error) {
	if o.state.load != "" {
		in, err := strata.ReadStateInfo(o.state.load)
		if err != nil {
			return nil, 0, fmt.Errorf("--load-state: %w", err)
		}
		held = in.Position
	}
	capacity := o.prefill.maxCtx
	if capacity == 0 {
		capacity = max(held+n, 4096)
	} else if held+n > capacity {
		return nil, 0, fmt.Errorf("--max-context %d: --load-state holds %d tokens and the prompt has %d; give at least %d", capacity, held, n, held+n)
	}
	sess, err = m.NewSession(strata.SessionOptions{MaxContext: capacity})
	return sess, held, err
}

// loadState loads --load-state into the session and says so.
func (o *options) loadState(sess *strata.Session) error {
	if o.state.load == "" {
		return nil
	}
	t0 := time.Now()
	if err := sess.LoadStateFile(o.state.load); err != nil {
		return err
	}
	fmt.Printf("state     loaded %s: %s in %v\n", o.state.load, plural(sess.Position(), "token"), time.Since(t0).Round(time.Millisecond))
	return nil
}

// printPrompt prints the prompt line: its tokens, where they came from, and how they run.
func (o *options) printPrompt(n, held int) {
	fmt.Printf("prompt    %s%s", plural(n, "token"), o.text.describe())
	if held > 0 {
		fmt.Printf(" after the %d loaded", held)
	}
	if o.prefill.chunk > 0 {
		fmt.Printf(" in calls of %d", o.prefill.chunk)
	}
	if o.prefill.step > 0 && o.prefill.step < n {
		fmt.Printf(", steps of %d", o.prefill.step)
	}
	fmt.Println()
}

// prefillResult is what the prefill calls of one run returned.
type prefillResult struct {
	total strata.Stats              // summed over the calls
	all   []float32                 // every call's logits, with --all-logits
	last  *strata.Logits            // the last call's
	cache *strata.PromptCacheResult // with --prompt-cache
}

// prefillAll prefills tokens in calls of --chunk tokens (one call without it; the prompt cache's
// own calls with --prompt-cache), in steps of --step, with a progress bar on stderr for prompts
// of 1024 tokens and more.
func (o *options) prefillAll(ctx context.Context, m *strata.Model, sess *strata.Session, tokens []int32) (*prefillResult, error) {
	call := len(tokens)
	if o.prefill.chunk > 0 {
		call = o.prefill.chunk
	}
	var pc *strata.PromptCache
	if o.state.cacheDir != "" {
		var err error
		if pc, err = strata.NewPromptCache(m, strata.PromptCacheOptions{Dir: o.state.cacheDir, Bytes: o.state.cacheBytes, Every: o.state.cacheEvery}); err != nil {
			return nil, err
		}
	}
	var pbar *progressbar.ProgressBar
	if len(tokens) >= 1024 {
		pbar = progressbar.NewOptions(1000, progressbar.OptionSetDescription("prefill"),
			progressbar.OptionSetWriter(os.Stderr), progressbar.OptionClearOnFinish())
		defer pbar.Finish()
	}
	res := &prefillResult{}
	for at := 0; at < len(tokens); at += call {
		end := min(at+call, len(tokens))
		opts := strata.PrefillOptions{AllLogits: o.prefill.allLogits, Step: o.step()}
		if pbar != nil {
			opts.Progress = func(done, n int) {
				pbar.Set(int(1000 * (float64(at) + float64(end-at)*float64(done)/float64(n)) / float64(len(tokens))))
			}
		}
		var lg *strata.Logits
		var err error
		if pc != nil {
			if lg, res.cache, err = pc.Prefill(ctx, sess, tokens, opts); err != nil {
				return nil, fmt.Errorf("prefill through the prompt cache: %w", err)
			}
		} else if lg, err = sess.Prefill(ctx, tokens[at:end], opts); err != nil {
			return nil, fmt.Errorf("prefill of tokens %d..%d: %w", at, end-1, err)
		}
		res.add(lg, o.prefill.allLogits)
	}
	return res, nil
}

// add sums one call's figures into r and keeps its logits.
func (r *prefillResult) add(lg *strata.Logits, all bool) {
	r.total.Add(lg.Stats)
	if all {
		r.all = append(r.all, lg.Data...)
	}
	r.last = lg
}

// step is --step as PrefillOptions.Step (0: one shot).
func (o *options) step() int {
	if o.prefill.step == 0 {
		return strata.OneShot
	}
	return o.prefill.step
}

// report prints the cache line, the prefill's figures, the kernels a GPU ran and the top-5.
func (o *options) report(dev *strata.Device, sess *strata.Session, res *prefillResult) {
	if res.cache != nil {
		fmt.Println(cacheLine(res.cache, o.state.cacheBytes, o.state.cacheDir))
	}
	if res.total.Tokens == 0 {
		fmt.Println("prefill   none: the whole prompt came from the prompt cache")
	} else {
		printStats(res.total)
	}
	if dev.Backend() != "cpu" {
		fmt.Printf("ran       %s\n", dev.Kernels())
	}
	row := res.last.Row(res.last.Rows - 1)
	fmt.Printf("top-5     next token after position %d:", sess.Position()-1)
	for _, id := range topK(row, 5) {
		fmt.Printf("  %d%s (%.4f)", id, o.text.tokenText(id), row[id])
	}
	fmt.Println()
}

// printStats prints the prefill line and the time of each stage.
func printStats(total strata.Stats) {
	fmt.Printf("prefill   %s in %v: %.1f tokens/s\n", plural(total.Tokens, "token"), total.Total.Round(time.Millisecond),
		float64(total.Tokens)/total.Total.Seconds())
	var staged time.Duration
	for _, d := range total.Stage {
		staged += d
	}
	printStages(total)
	other := total.Total - staged
	fmt.Printf("  %-14s %9.1f ms  %5.1f%%\n", "other", float64(other.Microseconds())/1000, 100*other.Seconds()/total.Total.Seconds())
	if !total.PerStage {
		// The device timed only whole command buffers: the stages above hold host work only.
		fmt.Printf("  %-14s %9.1f ms  %5.1f%%  (GPU time of the command buffers; no per-stage timing on this device)\n", "device",
			float64(total.Device.Microseconds())/1000, 100*total.Device.Seconds()/total.Total.Seconds())
	}
}

// printStages prints a line per stage: its wall time, its share of the prefill's and, where the
// backend measured it, the CPU time of the process meanwhile, the share of GOMAXPROCS cores that
// kept busy (Stats.CPU says how approximate), and its system part.
func printStages(st strata.Stats) {
	threads := runtime.GOMAXPROCS(0)
	for i, d := range st.Stage {
		fmt.Printf("  %-14s %9.1f ms  %5.1f%%", strata.Stage(i), float64(d.Microseconds())/1000, 100*d.Seconds()/st.Total.Seconds())
		if c := st.CPU[i]; c > 0 && d > 0 {
			fmt.Printf("  CPU %9.1f ms (%5.1f%% of GOMAXPROCS %d), system %7.1f ms", float64(c.Microseconds())/1000,
				100*c.Seconds()/(d.Seconds()*float64(threads)), threads, float64(st.SysCPU[i].Microseconds())/1000)
		}
		fmt.Println()
	}
}

// save writes --save-state, --save-mlx-lm-cache and --save-logits, each whole, and says so.
func (o *options) save(m *strata.Model, sess *strata.Session, res *prefillResult) error {
	if path := o.state.save; path != "" {
		t0 := time.Now()
		if err := sess.SaveStateFile(path); err != nil {
			return err
		}
		fi, _ := os.Stat(path)
		fmt.Printf("state     saved %s: %s, %.1f MiB in %v\n", path, plural(sess.Position(), "token"), mibOf(fi.Size()), time.Since(t0).Round(time.Millisecond))
	}
	if path := o.export.path; path != "" {
		t0 := time.Now()
		if err := sess.SaveMLXLMCache(path, o.export.opts); err != nil {
			return err
		}
		fi, _ := os.Stat(path)
		fmt.Printf("mlx-lm    saved %s: %s (%s format), %.1f MiB in %v\n", path, plural(sess.Position(), "token"), o.export.opts.Format, mibOf(fi.Size()), time.Since(t0).Round(time.Millisecond))
	}
	path := o.prefill.saveLogits
	if path == "" {
		return nil
	}
	rows := len(res.all) / m.Vocab() // every chunk's rows, not only the last chunk's
	if err := saveNPY(path, res.all, res.last.Row(res.last.Rows-1), rows, m.Vocab(), o.prefill.allLogits); err != nil {
		return fmt.Errorf("--save-logits %s: %w", path, err)
	}
	if o.prefill.allLogits {
		// A prompt-cache hit prefills only the tokens after the reused prefix.
		fmt.Printf("saved     %s: logits [%d, %d] of positions %d..%d\n", path, rows, m.Vocab(), sess.Position()-rows, sess.Position()-1)
	} else {
		fmt.Printf("saved     %s: logits [%d] of position %d\n", path, m.Vocab(), sess.Position()-1)
	}
	return nil
}
