package emu

import (
	"errors"
	"strconv"
	"strings"
)

// evalInt evaluates an integer constant expression of literals and operators (after
// preprocessing, function constant indices such as `FC_BASE + 1` look like `700 + 1`).
func evalInt(s string) (int64, error) {
	e := &intExpr{toks: tokenize(s)}
	v, err := e.ternary()
	if err != nil {
		return 0, err
	}
	if e.peek() != "" {
		return 0, errors.New("trailing tokens")
	}
	return v, nil
}

type intExpr struct {
	toks []token
	i    int
}

func (e *intExpr) peek() string {
	for e.i < len(e.toks) && e.toks[e.i].kind == tkSpace {
		e.i++
	}
	if e.i >= len(e.toks) {
		return ""
	}
	return e.toks[e.i].text
}

// peek2 reports whether the next two punctuation tokens are a and b (<<, >=, &&, ...).
func (e *intExpr) op2(a, b string) bool {
	if e.peek() != a || e.i+1 >= len(e.toks) || e.toks[e.i+1].text != b {
		return false
	}
	e.i += 2
	return true
}

func (e *intExpr) take(s string) bool {
	if e.peek() == s {
		e.i++
		return true
	}
	return false
}

func (e *intExpr) ternary() (int64, error) {
	c, err := e.binary(0)
	if err != nil || !e.take("?") {
		return c, err
	}
	a, err := e.ternary()
	if err != nil {
		return 0, err
	}
	if !e.take(":") {
		return 0, errors.New("missing ':'")
	}
	b, err := e.ternary()
	if c != 0 {
		return a, err
	}
	return b, err
}

// binary parses operators of precedence level lv and tighter.
func (e *intExpr) binary(lv int) (int64, error) {
	levels := [][]string{{"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", ">", "<=", ">="}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}}
	if lv == len(levels) {
		return e.unary()
	}
	x, err := e.binary(lv + 1)
	if err != nil {
		return 0, err
	}
	for {
		op := ""
		for _, o := range levels[lv] {
			save := e.i
			ok := false
			if len(o) == 2 {
				ok = e.op2(o[:1], o[1:])
			} else if e.peek() == o {
				// not the first half of a two-character operator
				nx := ""
				if e.i+1 < len(e.toks) {
					nx = e.toks[e.i+1].text
				}
				two := o + nx
				if two != "||" && two != "&&" && two != "<<" && two != ">>" && two != "<=" && two != ">=" && two != "==" && two != "!=" {
					e.i++
					ok = true
				}
			}
			if ok {
				op = o
				break
			}
			e.i = save
		}
		if op == "" {
			return x, nil
		}
		y, err := e.binary(lv + 1)
		if err != nil {
			return 0, err
		}
		switch op {
		case "||":
			x = b2i(x != 0 || y != 0)
		case "&&":
			x = b2i(x != 0 && y != 0)
		case "|":
			x |= y
		case "^":
			x ^= y
		case "&":
			x &= y
		case "==":
			x = b2i(x == y)
		case "!=":
			x = b2i(x != y)
		case "<":
			x = b2i(x < y)
		case ">":
			x = b2i(x > y)
		case "<=":
			x = b2i(x <= y)
		case ">=":
			x = b2i(x >= y)
		case "<<":
			x <<= uint(y)
		case ">>":
			x >>= uint(y)
		case "+":
			x += y
		case "-":
			x -= y
		case "*":
			x *= y
		case "/", "%":
			if y == 0 {
				return 0, errors.New("division by zero")
			}
			if op == "/" {
				x /= y
			} else {
				x %= y
			}
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (e *intExpr) unary() (int64, error) {
	switch e.peek() {
	case "-":
		e.i++
		v, err := e.unary()
		return -v, err
	case "+":
		e.i++
		return e.unary()
	case "~":
		e.i++
		v, err := e.unary()
		return ^v, err
	case "!":
		e.i++
		v, err := e.unary()
		return b2i(v == 0), err
	case "(":
		e.i++
		v, err := e.ternary()
		if err != nil {
			return 0, err
		}
		if !e.take(")") {
			return 0, errors.New("missing ')'")
		}
		return v, nil
	}
	if e.i >= len(e.toks) || e.toks[e.i].kind != tkNumber {
		return 0, errors.New("not an integer constant expression")
	}
	t := strings.TrimRight(strings.ToLower(strings.ReplaceAll(e.toks[e.i].text, "'", "")), "ul")
	e.i++
	if len(t) > 1 && t[0] == '0' && t[1] != 'x' && t[1] != 'b' {
		t = "0o" + t[1:]
	}
	v, err := strconv.ParseInt(t, 0, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(t, 0, 64)
		if uerr != nil {
			return 0, err
		}
		v = int64(u)
	}
	return v, nil
}
