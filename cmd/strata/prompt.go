package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stratakernels/strata/tokenizer"
)

// textFlags are the flags of text prompts: text in through the checkpoint's tokenizer.json,
// the top-5 next tokens out with their text.
type textFlags struct {
	prompt, promptFile, tokenizerPath string
	tokenize                          bool

	tok    *tokenizer.Tokenizer // nil without a tokenizer
	source string               // where tok came from, for display
	text   bool                 // the prompt is text (tok is required)
}

func (tf *textFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&tf.prompt, "prompt", "", "prompt text, turned into ids by the checkpoint's tokenizer.json")
	fs.StringVar(&tf.promptFile, "prompt-file", "", "file whose contents (UTF-8, exactly as stored) are the prompt text")
	fs.BoolVar(&tf.tokenize, "tokenize", false, "print the prompt's token ids (comma-separated, one line) and exit without loading weights")
	fs.StringVar(&tf.tokenizerPath, "tokenizer", "", "tokenizer.json to use instead of the checkpoint's")
}

func (tf *textFlags) hasText() bool { return tf.prompt != "" || tf.promptFile != "" }

// prepare reads the text prompt, if any, and loads the tokenizer (required for a text prompt;
// else used, when there is one, to show the top-5 as text). With --tokenize it prints the ids
// and reports done. ids is nil without a text prompt. modelDir is empty for the generated
// model; haveIDs says a token-id flag was given.
func (tf *textFlags) prepare(modelDir string, haveIDs bool) (ids []int32, done bool, err error) {
	text, isText, err := tf.promptText(haveIDs)
	if err != nil {
		return nil, false, err
	}
	if err := tf.loadTokenizer(modelDir, isText); err != nil {
		return nil, false, err
	}
	if tf.text = isText; !isText {
		return nil, false, nil
	}
	if ids, err = tf.encode(text); err != nil {
		return nil, false, err
	}
	if tf.tokenize {
		printIDs(ids)
		return nil, true, nil
	}
	return ids, false, nil
}

// describe is the prompt line's note on where the ids came from.
func (tf *textFlags) describe() string {
	if !tf.text {
		return ""
	}
	return " of text, through " + homeRel(tf.source)
}

// promptText returns the text of --prompt or --prompt-file; ok is false when neither is given.
// haveIDs says a token-id flag was given, which excludes a text prompt.
func (tf *textFlags) promptText(haveIDs bool) (text string, ok bool, err error) {
	if tf.prompt != "" && tf.promptFile != "" {
		return "", false, fmt.Errorf("give only one of --prompt, --prompt-file")
	}
	if !tf.hasText() {
		if tf.tokenize {
			return "", false, fmt.Errorf("--tokenize needs a text prompt: --prompt or --prompt-file")
		}
		return "", false, nil
	}
	if haveIDs {
		return "", false, fmt.Errorf("give either a text prompt (--prompt, --prompt-file) or token ids (--tokens, --tokens-file, --random-tokens), not both")
	}
	text = tf.prompt
	if tf.promptFile != "" {
		b, err := os.ReadFile(tf.promptFile)
		if err != nil {
			return "", false, fmt.Errorf("--prompt-file: %w", err)
		}
		if len(b) == 0 {
			return "", false, fmt.Errorf("--prompt-file %s is empty", tf.promptFile)
		}
		text = string(b)
	}
	return text, true, nil
}

// loadTokenizer loads --tokenizer, else dir's tokenizer.json (dir empty: the generated model,
// which has none). required says a text prompt needs it: then a missing or unusable file is an
// error; otherwise it only means the top-5 are printed without their text (an unusable file
// is reported on stderr).
func (tf *textFlags) loadTokenizer(dir string, required bool) error {
	path := tf.tokenizerPath
	if path == "" && strings.HasSuffix(strings.ToLower(dir), ".gguf") {
		if !required {
			return nil
		}
		tok, err := ggufTokenizer(dir)
		if err != nil {
			return err
		}
		tf.tok, tf.source = tok, dir
		return nil
	}
	if path == "" {
		if dir == "" {
			if required {
				return fmt.Errorf("the generated model has no tokenizer.json: give --tokenizer FILE, or --model DIR of a checkpoint with one")
			}
			return nil
		}
		path = filepath.Join(dir, tokenizer.FileName)
	}
	tok, err := tokenizer.Load(path)
	switch {
	case err == nil:
		tf.tok, tf.source = tok, path
		return nil
	case errors.Is(err, fs.ErrNotExist) && tf.tokenizerPath == "":
		if required {
			return fmt.Errorf("checkpoint %s has no %s: a text prompt needs one (or --tokenizer FILE; token ids go in with --tokens or --tokens-file)", dir, tokenizer.FileName)
		}
		return nil
	case required || tf.tokenizerPath != "":
		return err
	}
	fmt.Fprintf(os.Stderr, "strata: not using %s: %v\n", path, err)
	return nil
}

// encode turns the prompt text into ids.
func (tf *textFlags) encode(text string) ([]int32, error) {
	ids, err := tf.tok.Encode(text)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the prompt encodes to no tokens")
	}
	return ids, nil
}

// printIDs writes the ids comma-separated on one line (the --tokenize output, which --tokens
// and --tokens-file read back).
func printIDs(ids []int32) {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	fmt.Println(strings.Join(s, ","))
}

// checkVocab refuses a tokenizer whose ids the model has no rows for: an error for a text
// prompt, else the tokenizer is dropped (reported on stderr).
func (tf *textFlags) checkVocab(vocab int) error {
	if tf.tok == nil || tf.tok.VocabSize() <= vocab {
		return nil
	}
	err := fmt.Errorf("%s has %d token ids but the model's vocabulary is %d: they do not belong together",
		tf.source, tf.tok.VocabSize(), vocab)
	if tf.text {
		return err
	}
	fmt.Fprintf(os.Stderr, "strata: not using the tokenizer: %v\n", err)
	tf.tok = nil
	return nil
}

// tokenText is " TEXT" for a top-5 entry: the token's bytes quoted (Go syntax: bytes that are
// not valid UTF-8 on their own, such as part of a character, show as \x..), "" without a
// tokenizer, and " [no token]" for an id in the model's vocabulary but not the tokenizer's
// (padding rows).
func (tf *textFlags) tokenText(id int) string {
	if tf.tok == nil {
		return ""
	}
	b, err := tf.tok.TokenBytes(int32(id))
	if err != nil {
		return " [no token]"
	}
	return " " + strconv.Quote(string(b))
}

// ggufTokenizer is the tokenizer a GGUF file carries (tokenizer.LoadGGUF); a file without one is
// refused with the flags that stand in for it.
func ggufTokenizer(path string) (*tokenizer.Tokenizer, error) {
	tok, err := tokenizer.LoadGGUF(path)
	if errors.Is(err, tokenizer.ErrNoTokenizer) {
		return nil, fmt.Errorf("%w: give --tokenizer FILE, or token ids with --tokens or --tokens-file", err)
	}
	return tok, err
}
