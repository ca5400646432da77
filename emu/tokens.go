package emu

import (
	"strconv"
	"strings"
)

// tokKind classifies the tokens of preprocessed MSL source.
type tokKind int

const (
	tkSpace     tokKind = iota // whitespace, newlines included
	tkIdent                    // identifier or keyword
	tkNumber                   // numeric literal
	tkString                   // string or character literal
	tkPunct                    // one punctuation character, or "::"
	tkAttr                     // a whole [[...]] attribute group
	tkDirective                // a preprocessor line (#pragma; linemarkers are consumed)
)

// srcPos is where a token was in the source the user wrote: file, 1-based line and column.
type srcPos struct {
	file      string
	line, col int
}

func (p srcPos) valid() bool { return p.line > 0 }

type token struct {
	kind tokKind
	text string
	pos  srcPos
	// orig reports that text is the token as it was read (not rewritten): columns inside it map
	// one to one onto the source.
	orig bool
	// end is the source column just past the token (past the tokens it replaced), 0 if unknown.
	end int
	// ecol and eend are the columns of the token in the preprocessed line: tokens adjacent there
	// must stay adjacent (clang -E separates the ones that would otherwise merge).
	ecol, eend int
	// pre and post are text a rewrite writes around the token, leaving the token itself (a
	// bracket, say) for the structure the other rewrites read.
	pre, post string
}

// tokenize splits preprocessed source into tokens whose texts concatenate to the source, less its
// linemarkers (# N "file" ...), which set the positions of the tokens after them.
// rawString recognises a raw string literal whose prefix (R, u8R, uR, UR or LR) is
// src[start:i] and whose quote is src[i], and returns its end. A delimiter that is never closed
// runs to the end of src.
func rawString(src string, start, i int) (end int, ok bool) {
	switch src[start:i] {
	case "R", "u8R", "uR", "UR", "LR":
	default:
		return 0, false
	}
	if i >= len(src) || src[i] != '"' {
		return 0, false
	}
	open := strings.IndexByte(src[i+1:], '(')
	if open < 0 || open > 16 || strings.ContainsAny(src[i+1:i+1+open], " ()\\\t\v\f\n") {
		return 0, false
	}
	closer := ")" + src[i+1:i+1+open] + "\""
	body := i + 1 + open + 1
	if k := strings.Index(src[body:], closer); k >= 0 {
		return body + k + len(closer), true
	}
	return len(src), true
}

func tokenize(src string) []token {
	var toks []token
	i, n := 0, len(src)
	lineStart := true
	file, line, lineOff := "", 1, 0
	for i < n {
		c := src[i]
		start := i
		pos := srcPos{file, line, i - lineOff + 1}
		switch {
		case c == '#' && lineStart:
			for i < n && src[i] != '\n' {
				if src[i] == '\\' && i+1 < n && src[i+1] == '\n' {
					i++
				}
				i++
			}
			text := src[start:i]
			if f, l, ok := parseLinemarker(text); ok {
				file, line = f, l-1 // the newline ending the marker advances to l
			} else {
				toks = append(toks, token{kind: tkDirective, text: text, pos: pos, orig: true})
			}
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			for i < n && strings.IndexByte(" \t\n\r\f\v", src[i]) >= 0 {
				if src[i] == '\n' {
					lineStart = true
					line++
					lineOff = i + 1
				}
				i++
			}
			toks = append(toks, token{kind: tkSpace, text: src[start:i], pos: pos, orig: true})
			continue
		case isIdentStart(c):
			for i < n && isIdentChar(src[i]) {
				i++
			}
			if end, ok := rawString(src, start, i); ok {
				// A raw string literal (R"d(...)d", with an encoding prefix) may span lines. The
				// preprocessor's output counts it as one line (it writes the newlines it holds
				// again after it), so the line count does not advance inside it.
				i = end
				toks = append(toks, token{kind: tkString, text: src[start:i], pos: pos, orig: true})
				break
			}
			toks = append(toks, token{kind: tkIdent, text: src[start:i], pos: pos, orig: true})
		case isDigit(c) || (c == '.' && i+1 < n && isDigit(src[i+1])):
			for i < n && (isIdentChar(src[i]) || src[i] == '.' || src[i] == '\'' && i+1 < n && isIdentChar(src[i+1]) ||
				((src[i] == '+' || src[i] == '-') && strings.IndexByte("eEpP", src[i-1]) >= 0)) {
				i++
			}
			toks = append(toks, token{kind: tkNumber, text: src[start:i], pos: pos, orig: true})
		case c == '"' || c == '\'':
			i++
			for i < n && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			if i < n {
				i++
			}
			toks = append(toks, token{kind: tkString, text: src[start:i], pos: pos, orig: true})
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
				} else if src[i] == '\n' {
					line++
					lineOff = i + 1
				}
				i++
			}
			toks = append(toks, token{kind: tkAttr, text: src[start:i], pos: pos, orig: true})
		case c == ':' && i+1 < n && src[i+1] == ':':
			i += 2
			toks = append(toks, token{kind: tkPunct, text: "::", pos: pos, orig: true})
		default:
			i++
			toks = append(toks, token{kind: tkPunct, text: src[start:i], pos: pos, orig: true})
		}
		lineStart = false
	}
	for i := range toks {
		toks[i].end = toks[i].pos.col + len(toks[i].text)
		toks[i].ecol, toks[i].eend = toks[i].pos.col, toks[i].end
	}
	return toks
}

// parseLinemarker reads `# 12 "file.metal" 1 3`.
func parseLinemarker(d string) (string, int, bool) {
	s := strings.TrimSpace(strings.TrimPrefix(d, "#"))
	s = strings.TrimPrefix(s, "line ")
	sp := strings.IndexByte(s, ' ')
	if sp < 0 {
		return "", 0, false
	}
	l, err := strconv.Atoi(s[:sp])
	if err != nil {
		return "", 0, false
	}
	rest := strings.TrimSpace(s[sp:])
	if !strings.HasPrefix(rest, "\"") {
		return "", 0, false
	}
	end := strings.IndexByte(rest[1:], '"')
	if end < 0 {
		return "", 0, false
	}
	f, err := strconv.Unquote(rest[:end+2])
	if err != nil {
		f = rest[1 : end+1]
	}
	return f, l, true
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '$'
}
func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }
func isDigit(c byte) bool     { return c >= '0' && c <= '9' }

// srcToken is a token of an unpreprocessed source line: its text and 1-based column.
type srcToken struct {
	text string
	col  int
}

// lexLines splits unpreprocessed source into tokens per line (comments and preprocessor lines
// dropped), for aligning preprocessed tokens with the columns they had.
func lexLines(src string) map[int][]srcToken {
	out := map[int][]srcToken{}
	line, lineOff := 1, 0
	i, n := 0, len(src)
	lineStart := true
	for i < n {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			lineOff = i
			lineStart = true
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '\\' && i+1 < n && src[i+1] == '\n':
			i += 2
			line++
			lineOff = i
			continue
		case c == '#' && lineStart:
			for i < n && src[i] != '\n' {
				if src[i] == '\\' && i+1 < n && src[i+1] == '\n' {
					i++
					line++
					lineOff = i + 1
				}
				i++
			}
			continue
		case c == '/' && i+1 < n && src[i+1] == '/':
			for i < n && src[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < n && src[i+1] == '*':
			i += 2
			for i < n && !(src[i] == '*' && i+1 < n && src[i+1] == '/') {
				if src[i] == '\n' {
					line++
					lineOff = i + 1
				}
				i++
			}
			i += 2
			continue
		}
		lineStart = false
		start := i
		col := i - lineOff + 1
		switch {
		case isIdentStart(c):
			for i < n && isIdentChar(src[i]) {
				i++
			}
		case isDigit(c) || (c == '.' && i+1 < n && isDigit(src[i+1])):
			for i < n && (isIdentChar(src[i]) || src[i] == '.' || ((src[i] == '+' || src[i] == '-') && strings.IndexByte("eEpP", src[i-1]) >= 0)) {
				i++
			}
		case c == '"' || c == '\'':
			i++
			for i < n && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			if i < n {
				i++
			}
		case c == ':' && i+1 < n && src[i+1] == ':':
			i += 2
		default:
			i++
		}
		out[line] = append(out[line], srcToken{src[start:i], col})
	}
	return out
}

// alignColumns gives the tokens of each preprocessed line the columns of the same tokens in the
// source line they came from (clang -E collapses runs of spaces and drops comments). Tokens a
// macro produced keep their preprocessed column. sources maps file names to their text.
func alignColumns(toks []token, sources func(string) (string, bool)) {
	lexed := map[string]map[int][]srcToken{}
	for i := 0; i < len(toks); {
		p := toks[i].pos
		j := i
		for j < len(toks) && toks[j].pos.file == p.file && toks[j].pos.line == p.line {
			j++
		}
		if p.file != "" {
			lines, ok := lexed[p.file]
			if !ok {
				if text, found := sources(p.file); found {
					lines = lexLines(text)
				}
				lexed[p.file] = lines
			}
			if orig := lines[p.line]; len(orig) > 0 {
				cur := 0
				for k := i; k < j; k++ {
					t := &toks[k]
					if t.kind == tkSpace || t.kind == tkDirective {
						continue
					}
					text := t.text
					if t.kind == tkAttr {
						text = "["
					}
					for m := cur; m < len(orig); m++ {
						if orig[m].text != text {
							continue
						}
						t.pos.col = orig[m].col
						t.end = t.pos.col + len(t.text)
						cur = m + 1
						if t.kind == tkAttr { // skip the attribute's own tokens
							depth := 0
							for e := m; e < len(orig); e++ {
								switch orig[e].text {
								case "[":
									depth++
								case "]":
									depth--
								}
								if depth == 0 {
									cur = e + 1
									break
								}
							}
						}
						break
					}
				}
			}
		}
		i = j
	}
}

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
	inStr := byte(0)
	for i := 0; i < len(s); i++ {
		if inStr != 0 {
			if s[i] == '\\' {
				i++
			} else if s[i] == inStr {
				inStr = 0
			}
			continue
		}
		switch s[i] {
		case '"', '\'':
			inStr = s[i]
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

// stringLiteral joins adjacent string literals ("a" "b" -> ab) and unquotes them; ok is false when
// s is not one or more string literals.
func stringLiteral(s string) (string, bool) {
	s = strings.TrimSpace(s)
	var b strings.Builder
	for s != "" {
		if s[0] != '"' {
			return "", false
		}
		i := 1
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return "", false
		}
		u, err := strconv.Unquote(s[:i+1])
		if err != nil {
			return "", false
		}
		b.WriteString(u)
		s = strings.TrimSpace(s[i+1:])
	}
	return b.String(), true
}
