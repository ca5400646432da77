package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/rangetable"
)

// qwenPattern is the Split pre-tokenizer's regex in the tokenizer.json of Qwen2, Qwen3 and
// Qwen3-Next, character for character.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// qwen35Pattern is the Split pre-tokenizer's regex of Qwen3.5 and Qwen3.6 (the "original
// regex from tokenizer.json" of llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN35): qwenPattern with
// combining marks (\p{M}) joined to letters in the letter runs and taken out of the runs of
// other characters. The optional character before a letter run is unchanged, so it may be a
// mark.
const qwen35Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// splitter is one of the two split patterns, qwenPattern (marks false) or qwen35Pattern
// (marks true); the zero value is qwenPattern.
type splitter struct{ marks bool }

// splitters maps each implemented Split regex to its splitter.
var splitters = map[string]splitter{qwenPattern: {}, qwen35Pattern: {marks: true}}

// The patterns' character classes as tokenizers' regex engine (Oniguruma, Unicode 16.0.0)
// defines them: \p{L}, \p{N} and \p{M} are the general categories, \s is the White_Space
// property.
func isLetter(r rune) bool { return unicode.Is(letter16, r) }
func isNumber(r rune) bool { return unicode.Is(number16, r) }
func isMark(r rune) bool   { return unicode.Is(mark16, r) }
func isSpace(r rune) bool  { return unicode.Is(unicode.White_Space, r) }
func isCRLF(r rune) bool   { return r == '\r' || r == '\n' }

// isWord is the class of the letter runs: \p{L}, or [\p{L}\p{M}] with marks.
func (sp splitter) isWord(r rune) bool { return isLetter(r) || sp.marks && isMark(r) }

// isOther is the class of the runs of other characters: [^\s\p{L}\p{N}], or
// [^\s\p{L}\p{M}\p{N}] with marks.
func (sp splitter) isOther(r rune) bool {
	return !isSpace(r) && !isLetter(r) && !isNumber(r) && !(sp.marks && isMark(r))
}

// contractionFold maps each character that (?i:...) matches to a lower-case letter of the
// contractions: its simple case-folding orbit, so 'S' and 'ſ' (U+017F) match s, as in
// Oniguruma.
var contractionFold = func() map[rune]rune {
	m := map[rune]rune{}
	for _, c := range "strevmld" {
		for r := c; ; {
			m[r] = c
			if r = unicode.SimpleFold(r); r == c {
				break
			}
		}
	}
	return m
}()

// split cuts text into the pieces the pattern's matches make with the Isolated behaviour
// (each match a piece; text between matches, which this pattern leaves none of, a piece too).
// At each position the pattern's alternatives are tried in order, with the backtracking a
// regex engine does, and the first that matches gives the piece.
func (sp splitter) split(text string, emit func(piece string)) {
	gap := -1 // start of unmatched text, if any
	for i := 0; i < len(text); {
		end := sp.match(text, i)
		if end < 0 {
			if gap < 0 {
				gap = i
			}
			_, n := utf8.DecodeRuneInString(text[i:])
			i += n
			continue
		}
		if gap >= 0 {
			emit(text[gap:i])
			gap = -1
		}
		emit(text[i:end])
		i = end
	}
	if gap >= 0 {
		emit(text[gap:])
	}
}

// runeAt decodes the character at byte i of s; r is -1 at the end.
func runeAt(s string, i int) (r rune, n int) {
	if i >= len(s) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(s[i:])
}

// match returns the end of the pattern's match starting at byte i of s, or -1.
func (sp splitter) match(s string, i int) int {
	r0, n0 := runeAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r0 == '\'' {
		r1, n1 := runeAt(s, i+1)
		switch contractionFold[r1] {
		case 's', 't', 'm', 'd':
			return i + 1 + n1
		case 'r', 'v':
			if r2, n2 := runeAt(s, i+1+n1); contractionFold[r2] == 'e' {
				return i + 1 + n1 + n2
			}
		case 'l':
			if r2, n2 := runeAt(s, i+1+n1); contractionFold[r2] == 'l' {
				return i + 1 + n1 + n2
			}
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+, or [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ with marks. A word character
	// at i starts the run (a mark there, taken by the optional class, gives the same end
	// whether or not a word character follows it); another character but \r, \n and \p{N}
	// starts it when a word character follows.
	switch {
	case sp.isWord(r0):
		return sp.wordRun(s, i)
	case !isCRLF(r0) && !isNumber(r0):
		if r1, _ := runeAt(s, i+n0); sp.isWord(r1) {
			return sp.wordRun(s, i+n0)
		}
	}
	// \p{N}
	if isNumber(r0) {
		return i + n0
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*', or ' ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*' with marks
	j := i
	if r0 == ' ' {
		j += n0
	}
	if r, _ := runeAt(s, j); r >= 0 && sp.isOther(r) {
		for {
			r, n := runeAt(s, j)
			if r < 0 || !sp.isOther(r) {
				break
			}
			j += n
		}
		for j < len(s) && isCRLF(rune(s[j])) {
			j++
		}
		return j
	}
	if !isSpace(r0) {
		return -1
	}
	// The whitespace run [i, end), its last character at last, its last \r or \n at crlf.
	end, last, crlf := i, i, -1
	for {
		r, n := runeAt(s, end)
		if r < 0 || !isSpace(r) {
			break
		}
		if isCRLF(r) {
			crlf = end
		}
		last = end
		end += n
	}
	// \s*[\r\n]+: \s* backs off to the run's last \r or \n, which [\r\n]+ then takes (the
	// character after it is not one, or it would be the last).
	if crlf >= 0 {
		return crlf + 1
	}
	// \s+(?!\S): the whole run at the end of the text, else the run but its last character
	// (which, being white space, satisfies the lookahead), if that leaves one.
	if end == len(s) {
		return end
	}
	if last > i {
		return last
	}
	// \s+
	return end
}

// wordRun returns the end of the run of word characters (isWord) starting at byte i.
func (sp splitter) wordRun(s string, i int) int {
	for {
		r, n := runeAt(s, i)
		if r < 0 || !sp.isWord(r) {
			return i
		}
		i += n
	}
}

// normalizationVersion is the Unicode version of the normalization tables of tokenizers (its
// crate unicode-normalization-alignments 0.1.12 has Unicode 9.0.0 tables).
const normalizationVersion = "9.0.0"

// assigned9 holds the characters assigned in normalizationVersion.
var assigned9 = rangetable.Assigned(normalizationVersion)

// nfc is tokenizers' NFC normalizer: NFC with Unicode 9.0.0 data. Unicode's stability policy
// keeps the decomposition and combining class of an assigned character unchanged in later
// versions, so x/text's (newer) NFC is that normalizer for characters assigned in 9.0.0; a
// character assigned later has no data in 9.0.0: class 0, no decomposition, no composition,
// so it stays as it is and nothing composes or reorders across it. nfc therefore runs x/text's
// NFC on the stretches between such characters and keeps them verbatim. (This matters for
// text like U+11935 U+11930, which NFC composes to U+11938 since Unicode 13 and tokenizers
// leaves alone.)
func nfc(s string) string { return normalize9(norm.NFC, s) }

// normalize9 is Unicode normalization form f with Unicode 9.0.0 data (see nfc).
func normalize9(f norm.Form, s string) string {
	var b []byte
	start := 0
	for i, r := range s {
		if r < 0x0378 || unicode.Is(assigned9, r) { // U+0378 is the first code point unassigned in 9.0.0
			continue
		}
		if b == nil {
			b = make([]byte, 0, len(s)+8)
		}
		b = f.AppendString(b, s[start:i])
		b = utf8.AppendRune(b, r)
		start = i + utf8.RuneLen(r)
	}
	if b == nil {
		return f.String(s)
	}
	return string(f.AppendString(b, s[start:]))
}
