package tokenizer

import (
	"slices"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/rangetable"
)

// TestSplitQwen35Pieces: the pieces of both patterns on texts where combining marks meet
// letters, digits, symbols, spaces, newlines and contractions. The expected pieces are worked
// out by hand from the regexes (the alternatives tried in order, with backtracking); the cases
// where the two patterns agree check that the marks change only what they should.
func TestSplitQwen35Pieces(t *testing.T) {
	cases := []struct {
		text      string
		qwen35    []string
		qwen2     []string // nil: the same as qwen35
		whyQwen35 string
	}{
		{"q\u0303 x", []string{"q\u0303", " x"}, []string{"q", "\u0303", " x"}, "the mark joins the letter run"},
		{"\u0301abc", []string{"\u0301abc"}, nil, "a leading mark is the optional character before the letters in both"},
		{"a \u0300 b", []string{"a", " \u0300", " b"}, nil, "space + mark: a word run with a space before it (qwen2: a run of others)"},
		{"1\u0301", []string{"1", "\u0301"}, nil, "a mark after a digit stands alone"},
		{"!\u0301", []string{"!\u0301"}, nil, "symbol + mark: the optional character and a one-mark run (qwen2: a run of others)"},
		{"!\u0301x", []string{"!\u0301x"}, []string{"!\u0301", "x"}, "symbol, then marks and letters as one run"},
		{"it's\u0301", []string{"it", "'s", "\u0301"}, nil, "the contraction is tried first"},
		{"'\u0301s", []string{"'\u0301s"}, []string{"'\u0301", "s"}, "no contraction; the apostrophe starts a word run"},
		{"\u2764\ufe0fx", []string{"\u2764\ufe0fx"}, []string{"\u2764\ufe0f", "x"}, "VS16 (Mn) is a mark"},
		{"\u2764\ufe0f x", []string{"\u2764\ufe0f", " x"}, nil, ""},
		{"x\u20dd y", []string{"x\u20dd", " y"}, []string{"x", "\u20dd", " y"}, "an enclosing mark (Me)"},
		{"नमस्ते", []string{"नमस्ते"}, []string{"नमस", "्त", "े"}, "Devanagari virama and vowel sign"},
		{"ก่า", []string{"ก่า"}, []string{"ก", "่า"}, "Thai tone mark"},
		{"  \u0301\u0301x", []string{" ", " \u0301\u0301x"}, []string{" ", " \u0301\u0301", "x"}, "\\s+(?!\\S) leaves the last space to the run"},
		{"\n\u0301", []string{"\n", "\u0301"}, nil, "no optional \\n before a run"},
		{"\u0301\n", []string{"\u0301", "\n"}, []string{"\u0301\n"}, "a mark is no longer in the run of others that takes trailing newlines"},
		{"", nil, nil, ""},
	}
	split := func(sp splitter, text string) []string {
		var got []string
		sp.split(text, func(p string) { got = append(got, p) })
		return got
	}
	for _, c := range cases {
		want2 := c.qwen2
		if want2 == nil {
			want2 = c.qwen35
		}
		if got := split(splitters[qwen35Pattern], c.text); !slices.Equal(got, c.qwen35) {
			t.Errorf("qwen35 %+q: pieces %+q, want %+q (%s)", c.text, got, c.qwen35, c.whyQwen35)
		}
		if got := split(splitters[qwenPattern], c.text); !slices.Equal(got, want2) {
			t.Errorf("qwen2 %+q: pieces %+q, want %+q", c.text, got, want2)
		}
	}
}

// TestMarkTable: mark16 (Unicode 16.0.0, from the npm package) agrees with Go's unicode.M on
// every character assigned in Go's Unicode version, and is disjoint from letter16 and number16.
func TestMarkTable(t *testing.T) {
	assignedGo := rangetable.Assigned(unicode.Version)
	if assignedGo == nil {
		t.Fatalf("x/text has no assigned table for Unicode %s", unicode.Version)
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if isMark(r) && (isLetter(r) || isNumber(r) || isSpace(r)) {
			t.Fatalf("U+%04X is a mark and a letter, number or space", r)
		}
		if unicode.Is(assignedGo, r) && isMark(r) != unicode.Is(unicode.M, r) {
			t.Errorf("U+%04X: mark16 %v, unicode.M (Unicode %s) %v", r, isMark(r), unicode.Version, unicode.Is(unicode.M, r))
		}
	}
}
