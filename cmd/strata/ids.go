package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"

	"codeberg.org/sbinet/npyio/npy"

	"github.com/stratakernels/strata/strata"
)

// parseIDs reads token ids separated by commas, white space or both (a file's newlines, CRLF
// and tabs included; a UTF-8 byte order mark at the start is skipped). An empty entry between two
// commas or at an end (a lost id) is an error.
func parseIDs(list string) ([]int32, error) {
	list = strings.TrimPrefix(list, "\ufeff")
	if strings.Contains(list, ",") {
		for _, e := range strings.Split(list, ",") {
			if strings.TrimSpace(e) == "" {
				return nil, fmt.Errorf("empty entry in the token list (two commas in a row, or one at an end)")
			}
		}
	}
	var out []int32
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		v, err := strconv.ParseInt(f, 10, 32)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("token %q: outside the int32 range of token ids", f)
		} else if err != nil {
			return nil, fmt.Errorf("token %q: not an integer token id", f)
		}
		out = append(out, int32(v))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no token ids given")
	}
	return out, nil
}

// readFile reads --tokens-file, when given, into fileText. The run calls it before it catches
// SIGINT and SIGTERM: opening a FIFO waits for a writer, and only a signal's default action ends
// that wait.
func (f *idFlags) readFile() error {
	if f.file == "" {
		return nil
	}
	b, err := os.ReadFile(f.file)
	if err != nil {
		return fmt.Errorf("--tokens-file: %w", err)
	}
	f.fileText = b
	return nil
}

// promptTokens are the ids of --tokens, --tokens-file (read by readFile) or --random-tokens
// (seeded by --seed); without any of them, for the generated model (generated), 300 random ids
// below vocab.
func promptTokens(f idFlags, generated bool, vocab int) ([]int32, error) {
	n := 0
	for _, set := range []bool{f.list != "", f.file != "", f.random > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("give only one of --tokens, --tokens-file, --random-tokens")
	}
	switch {
	case f.file != "":
		b := f.fileText
		if strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("--tokens-file %s holds no token ids", f.file)
		}
		ids, err := parseIDs(string(b))
		if err != nil {
			return nil, fmt.Errorf("--tokens-file %s: %w", f.file, err)
		}
		return ids, nil
	case f.list != "":
		ids, err := parseIDs(f.list)
		if err != nil {
			return nil, fmt.Errorf("--tokens: %w", err)
		}
		return ids, nil
	}
	randomN := f.random
	if randomN <= 0 {
		if !generated {
			return nil, fmt.Errorf("--model needs a prompt: --tokens, --tokens-file or --random-tokens")
		}
		randomN = 300
	}
	r := rand.New(rand.NewPCG(f.seed, 0x70c))
	out := make([]int32, randomN)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out, nil
}

// topK are the indices of the k largest values of row, largest first.
func topK(row []float32, k int) []int {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	// NaN ranks last (a NaN logit means a broken checkpoint; it must not reorder the others).
	greater := func(x, y float32) bool {
		if x != x {
			return false
		}
		return y != y || x > y
	}
	sort.SliceStable(idx, func(a, b int) bool { return greater(row[idx[a]], row[idx[b]]) })
	return idx[:min(k, len(idx))]
}

// saveNPY writes the logits to path as float32 .npy: [T, vocab] of all with allRows, else the
// [vocab] of last. A regular file (or a new one) is replaced whole or not at all, through
// strata.WriteFile (a temporary file beside it, renamed over it once complete), so a failed write
// leaves what path held. Anything else that exists there (a device, a pipe) is written in place,
// never removed or replaced (WriteFile too: a FIFO with no reader is refused, not waited on).
func saveNPY(path string, all, last []float32, T, vocab int, allRows bool) error {
	var v any = last
	if allRows {
		rows := make([][]float32, T)
		for t := range rows {
			rows[t] = all[t*vocab : (t+1)*vocab]
		}
		v = rows
	}
	return strata.WriteFile(path, func(w io.Writer) error { return npy.Write(w, v) })
}
