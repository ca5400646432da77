package tokenizer

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

type addedToken struct {
	id      int32
	content string
	special bool
}

// addedVocab finds added tokens in raw text, as tokenizers' AddedVocabulary does for tokens
// with normalized false: leftmost match first, the longest one where several start at the same
// byte, then on after it.
type addedVocab struct {
	tokens  []addedToken
	byFirst [256][]int // token indices by first byte, longest content first
	special map[int32]bool
}

// newAddedVocab checks tokenizer.json's added_tokens and indexes them.
func newAddedVocab(list []addedJSON) (*addedVocab, error) {
	tokens := make([]addedToken, 0, len(list))
	ids := map[int32]string{}
	contents := map[string]bool{}
	for i, a := range list {
		where := fmt.Sprintf("added_tokens[%d] (%q)", i, a.Content)
		switch {
		case a.ID == nil:
			return nil, fmt.Errorf("%w: %s has no id", ErrFormat, where)
		case *a.ID < 0 || *a.ID > math.MaxInt32:
			return nil, fmt.Errorf("%w: %s has id %d outside [0, 2^31)", ErrFormat, where, *a.ID)
		case a.Content == "":
			return nil, fmt.Errorf("%w: %s has empty content", ErrFormat, where)
		case a.SingleWord, a.LStrip, a.RStrip, a.Normalized:
			return nil, fmt.Errorf("%w: %s has single_word %v, lstrip %v, rstrip %v, normalized %v (only all false is implemented)",
				ErrUnsupported, where, a.SingleWord, a.LStrip, a.RStrip, a.Normalized)
		}
		id := int32(*a.ID)
		if other, dup := ids[id]; dup {
			return nil, fmt.Errorf("%w: %s shares id %d with %q", ErrFormat, where, id, other)
		}
		if contents[a.Content] {
			return nil, fmt.Errorf("%w: %s is listed twice", ErrFormat, where)
		}
		ids[id], contents[a.Content] = a.Content, true
		tokens = append(tokens, addedToken{id: id, content: a.Content, special: a.Special})
	}
	return indexAdded(tokens), nil
}

// indexAdded builds the matcher of tokens, whose ids and contents are distinct and whose
// contents are not empty.
func indexAdded(tokens []addedToken) *addedVocab {
	v := &addedVocab{tokens: tokens, special: map[int32]bool{}}
	for i, a := range v.tokens {
		if a.special {
			v.special[a.id] = true
		}
		v.byFirst[a.content[0]] = append(v.byFirst[a.content[0]], i)
	}
	for c := range v.byFirst {
		l := v.byFirst[c]
		sort.SliceStable(l, func(x, y int) bool { return len(v.tokens[l[x]].content) > len(v.tokens[l[y]].content) })
	}
	return v
}

// checkAgainst refuses added tokens that disagree with the BPE vocabulary (a content there under
// another id, or an id there with another content): tokenizers would renumber them.
func (v *addedVocab) checkAgainst(b *bpe) error {
	byID := make(map[int32]string, len(b.vocab))
	for tok, id := range b.vocab {
		byID[id] = tok
	}
	for _, a := range v.tokens {
		if id, ok := b.vocab[a.content]; ok && id != a.id {
			return fmt.Errorf("%w: added token %q has id %d but the vocabulary has it as %d", ErrFormat, a.content, a.id, id)
		}
		if tok, ok := byID[a.id]; ok && tok != a.content {
			return fmt.Errorf("%w: added token %q has id %d, which the vocabulary gives to %q", ErrFormat, a.content, a.id, tok)
		}
	}
	return nil
}

func (v *addedVocab) isSpecial(id int32) bool { return v.special[id] }

// split calls emit for each stretch of text without added tokens (id -1) and each added token
// (its id), in order. Empty stretches are skipped.
func (v *addedVocab) split(text string, emit func(segment string, id int32)) {
	start := 0
	for i := 0; i < len(text); {
		found := -1
		for _, k := range v.byFirst[text[i]] {
			if strings.HasPrefix(text[i:], v.tokens[k].content) {
				found = k
				break
			}
		}
		if found < 0 {
			i++
			continue
		}
		if i > start {
			emit(text[start:i], -1)
		}
		a := v.tokens[found]
		emit(a.content, a.id)
		i += len(a.content)
		start = i
	}
	if start < len(text) {
		emit(text[start:], -1)
	}
}
