package emu

import "strings"

// tokKind classifies the tokens of preprocessed MSL source.
type tokKind int

const (
	tkSpace     tokKind = iota // whitespace, newlines included
	tkIdent                    // identifier or keyword
	tkNumber                   // numeric literal
	tkString                   // string or character literal
	tkPunct                    // one punctuation character, or "::"
	tkAttr                     // a whole [[...]] attribute group
	tkDirective                // a preprocessor line (linemarkers, #pragma)
)

type token struct {
	kind tokKind
	text string
}

// tokenize splits preprocessed source into tokens whose texts concatenate to the source.
func tokenize(src string) []token {
	var toks []token
	i, n := 0, len(src)
	lineStart := true
	for i < n {
		c := src[i]
		start := i
		switch {
		case c == '#' && lineStart:
			for i < n && src[i] != '\n' {
				if src[i] == '\\' && i+1 < n && src[i+1] == '\n' {
					i++
				}
				i++
			}
			toks = append(toks, token{tkDirective, src[start:i]})
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			for i < n && strings.IndexByte(" \t\n\r\f\v", src[i]) >= 0 {
				if src[i] == '\n' {
					lineStart = true
				}
				i++
			}
			toks = append(toks, token{tkSpace, src[start:i]})
			continue
		case isIdentStart(c):
			for i < n && isIdentChar(src[i]) {
				i++
			}
			toks = append(toks, token{tkIdent, src[start:i]})
		case isDigit(c) || (c == '.' && i+1 < n && isDigit(src[i+1])):
			for i < n && (isIdentChar(src[i]) || src[i] == '.' ||
				((src[i] == '+' || src[i] == '-') && strings.IndexByte("eEpP", src[i-1]) >= 0)) {
				i++
			}
			toks = append(toks, token{tkNumber, src[start:i]})
		case c == '"' || c == '\'':
			i++
			for i < n && src[i] != c {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			if i < n {
				i++
			}
			toks = append(toks, token{tkString, src[start:i]})
		case c == '[' && i+1 < n && src[i+1] == '[':
			depth := 0
			for i < n {
				if src[i] == '[' {
					depth++
				} else if src[i] == ']' {
					depth--
					if depth == 0 {
						i++
						break
					}
				}
				i++
			}
			toks = append(toks, token{tkAttr, src[start:i]})
		case c == ':' && i+1 < n && src[i+1] == ':':
			i += 2
			toks = append(toks, token{tkPunct, "::"})
		default:
			i++
			toks = append(toks, token{tkPunct, src[start:i]})
		}
		lineStart = false
	}
	return toks
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

// attr is one attribute of a [[...]] group: name and argument text.
type attr struct {
	name, arg string
}

// parseAttrs splits "[[a, b(1)]]" into its attributes.
func parseAttrs(text string) []attr {
	inner := strings.TrimSpace(text[2 : len(text)-2])
	var out []attr
	for _, part := range splitTop(inner, ',') {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		a := attr{name: part}
		if p := strings.IndexByte(part, '('); p >= 0 && strings.HasSuffix(part, ")") {
			a.name = strings.TrimSpace(part[:p])
			a.arg = strings.TrimSpace(part[p+1 : len(part)-1])
		}
		out = append(out, a)
	}
	return out
}

// splitTop splits s at sep outside parentheses, brackets, braces and angle brackets.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{', '<':
			depth++
		case ')', ']', '}', '>':
			depth--
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// newlines returns the newlines of s, so that blanked text keeps line numbers.
func newlines(s string) string { return strings.Repeat("\n", strings.Count(s, "\n")) }
