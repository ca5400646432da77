package emu

// The pre-pass reads preprocessed MSL as a token stream. It does not parse C++; it classifies each
// brace as what it opens (namespace, class, enum, function body, block, initializer), from the
// tokens before it, which is what the MSL rule checks and the rewrites need to know: whether a
// declaration is at program scope, in a class, or in a function, and in which kernel.

type scopeKind uint8

const (
	scNamespace scopeKind = iota // the translation unit, a namespace, an extern "C" block
	scClass                      // struct, class or union body
	scEnum                       // enumerator list
	scFunc                       // a function or lambda body
	scBlock                      // a compound statement inside a function
	scInit                       // a braced initializer
)

func (k scopeKind) inFunction() bool { return k == scFunc || k == scBlock }

// scopes records, for each token, the kind of the innermost scope it is in (the opening brace of a
// scope belongs to the enclosing one), and for each opening brace what it opens.
type scopes struct {
	kind  []scopeKind
	opens map[int]scopeKind
	// funcOf is the index of the opening brace of the function body each token is in (-1 outside
	// functions); a lambda body counts as part of its enclosing function.
	funcOf []int
	// inClass reports that a token is inside a class body (member functions' bodies included).
	inClass []bool
}

func (r *rewriter) computeScopes() {
	n := len(r.t)
	s := &scopes{kind: make([]scopeKind, n), opens: map[int]scopeKind{}, funcOf: make([]int, n), inClass: make([]bool, n)}
	type frame struct {
		kind  scopeKind
		fn    int
		class bool
	}
	stack := []frame{{scNamespace, -1, false}}
	for i := 0; i < n; i++ {
		top := stack[len(stack)-1]
		s.kind[i] = top.kind
		s.funcOf[i] = top.fn
		s.inClass[i] = top.class
		tk := r.t[i]
		if tk.kind != tkPunct {
			continue
		}
		switch tk.text {
		case "{":
			k := r.classifyBrace(i, top.kind)
			s.opens[i] = k
			fn := top.fn
			if k == scFunc && fn < 0 {
				fn = i
			}
			stack = append(stack, frame{k, fn, top.class || k == scClass})
		case "}":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	r.sc = s
}

// head returns the first significant token of the construct whose brace is at i: after the
// previous ';', '{' or '}' at the same nesting of parentheses and brackets.
func (r *rewriter) head(i int) int {
	depth := 0
	for j := i - 1; j >= 0; j-- {
		tk := r.t[j]
		if tk.kind == tkDirective {
			return r.next(j)
		}
		if tk.kind != tkPunct {
			continue
		}
		switch tk.text {
		case ")", "]":
			depth++
		case "(", "[":
			depth--
			if depth < 0 {
				return r.next(j)
			}
		case ";", "{", "}":
			if depth == 0 {
				return r.next(j)
			}
		}
	}
	return r.next(-1)
}

// classifyBrace decides what the '{' at i opens, inside a scope of kind parent.
func (r *rewriter) classifyBrace(i int, parent scopeKind) scopeKind {
	if parent == scInit || parent == scEnum {
		return scInit
	}
	p := r.prev(i)
	if p < 0 {
		return scBlock
	}
	pt := r.t[p]
	h := r.head(i)
	// Keywords in the head (outside parentheses) name namespaces, classes and enums.
	depth := 0
	isOperator := false
	for k := h; k < i; k++ {
		if r.is(k, tkIdent, "operator") {
			isOperator = true
		}
	}
	for k := h; k < i; k++ {
		tk := r.t[k]
		if tk.kind == tkPunct {
			switch tk.text {
			case "(", "[", "<":
				depth++
			case ")", "]":
				depth--
			case ">":
				if !r.is(k-1, tkPunct, "-") {
					depth--
				}
			case "=":
				if depth == 0 && !isOperator {
					return scInit
				}
			}
			continue
		}
		if tk.kind != tkIdent || depth != 0 {
			continue
		}
		switch tk.text {
		case "namespace":
			return scNamespace
		case "extern":
			if n := r.next(k); n < i && r.t[n].kind == tkString {
				return scNamespace
			}
		case "enum":
			return scEnum
		case "struct", "class", "union":
			// `struct X {`, `template <class T> struct X : B<T> {`; not `f(struct X* p) {`.
			if !r.is(p, tkPunct, ")") {
				return scClass
			}
		}
	}
	switch {
	case pt.kind == tkPunct && pt.text == ")":
		open := r.matchBack(p)
		before := r.prev(open)
		if parent.inFunction() {
			if before >= 0 && r.t[before].kind == tkIdent {
				switch r.t[before].text {
				case "if", "for", "while", "switch", "catch", "constexpr":
					return scBlock
				}
			}
			if r.is(before, tkPunct, "]") {
				return scFunc // lambda
			}
			return scBlock
		}
		return scFunc
	case pt.kind == tkPunct && pt.text == "]":
		if parent.inFunction() {
			return scFunc // lambda without parameters
		}
		return scInit
	case pt.kind == tkIdent:
		switch pt.text {
		case "else", "do", "try":
			return scBlock
		case "const", "noexcept", "override", "final", "mutable", "volatile", "__global", "__local",
			"__private", "__constant", "__generic", "device", "threadgroup", "thread", "constant":
			if parent.inFunction() && pt.text != "mutable" {
				return scInit
			}
			return scFunc
		}
		if parent.inFunction() {
			return scInit
		}
		// A trailing return type, `auto f() -> T {`.
		for k := p; k > h; k-- {
			if r.is(k, tkPunct, ">") && r.is(k-1, tkPunct, "-") {
				return scFunc
			}
		}
		return scInit
	case pt.kind == tkAttr:
		return scFunc
	case pt.kind == tkPunct && (pt.text == ";" || pt.text == "{" || pt.text == "}" || pt.text == ":"):
		if parent.inFunction() {
			return scBlock
		}
		if pt.text == ":" {
			return scInit
		}
		return scFunc // a constructor body after a braced member initializer
	case pt.kind == tkPunct && pt.text == ">":
		// `Foo<T>{...}` in an expression, or `-> vec<T, 2> {` (trailing return type).
		for k := p; k > h; k-- {
			if r.is(k, tkPunct, ">") && r.is(k-1, tkPunct, "-") {
				return scFunc
			}
		}
		return scInit
	}
	return scInit
}

// matchBack returns the index of the '(' or '[' that the closing token at i closes.
func (r *rewriter) matchBack(i int) int {
	closeT := r.t[i].text
	openT := map[string]string{")": "(", "]": "[", "}": "{"}[closeT]
	d := 0
	for j := i; j >= 0; j-- {
		if r.t[j].kind != tkPunct {
			continue
		}
		switch r.t[j].text {
		case closeT:
			d++
		case openT:
			d--
			if d == 0 {
				return j
			}
		}
	}
	return 0
}
