package emu

import (
	"strings"
)

// tparamScope is a template's extent and the names of its type parameters.
type tparamScope struct {
	start, end int
	names      map[string]bool
}

// templateScopes finds every template head and the declaration it introduces.
func (r *rewriter) templateScopes() []tparamScope {
	var out []tparamScope
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "template") {
			continue
		}
		lt := r.next(i)
		if !r.is(lt, tkPunct, "<") {
			continue
		}
		gt := r.match(lt)
		names := map[string]bool{}
		for _, part := range splitTop(r.text(lt+1, gt), ',') {
			part = strings.TrimSpace(part)
			if eq := topLevelIndex(part, '='); eq >= 0 {
				part = strings.TrimSpace(part[:eq])
			}
			f := strings.Fields(strings.NewReplacer("...", " ").Replace(part))
			if len(f) >= 2 && (f[0] == "typename" || f[0] == "class") {
				names[f[len(f)-1]] = true
			}
		}
		// The declaration ends at the ';' or at the end of the first body after the head.
		end := len(r.t) - 1
		depth := 0
		for k := gt + 1; k < len(r.t); k++ {
			if r.t[k].kind != tkPunct {
				continue
			}
			switch r.t[k].text {
			case "(", "[":
				depth++
			case ")", "]":
				depth--
			case ";":
				if depth == 0 {
					end = k
				}
			case "{":
				if depth == 0 {
					end = r.match(k)
				}
			}
			if end != len(r.t)-1 {
				break
			}
		}
		if len(names) > 0 {
			out = append(out, tparamScope{gt, end, names})
		}
	}
	return out
}

// typeParamAt reports whether name is a template type parameter in scope at token i.
func typeParamAt(scopes []tparamScope, i int, name string) bool {
	for _, s := range scopes {
		if i > s.start && i <= s.end && s.names[name] {
			return true
		}
	}
	return false
}

// vectors rewrites MSL vector constructors (float4(a, b), half4(f4), vec<T, 2>(x, y)) and casts to
// vector types ((uint4)f4, static_cast<int2>(f2), casts to typedefs of vector types and to
// template type parameters), which clang would reject or take as bit-casts, into value
// conversions.
func (r *rewriter) vectors() {
	r.collectVecAliases()
	tps := r.templateScopes()
	isVec := func(i int) bool {
		t := r.t[i]
		return t.kind == tkIdent && (vecTypes[t.text] || r.vecAliases[t.text])
	}
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if tk.kind != tkIdent && tk.kind != tkPunct {
			continue
		}
		pv := r.prev(i)
		member := r.is(pv, tkPunct, ".") || r.is(pv, tkPunct, ">") && r.is(pv-1, tkPunct, "-")
		// T(args) for a vector type T, and vec<T, N>(args); not `operator vec<T, 2>()`.
		if tk.kind == tkIdent && !member && !r.is(pv, tkIdent, "operator") && !(r.is(pv, tkPunct, "::") && r.is(r.prev(r.prev(pv)), tkIdent, "operator")) &&
			(isVec(i) || tk.text == "vec" && r.is(r.next(i), tkPunct, "<")) {
			end := i
			if tk.text == "vec" && !r.vecAliases["vec"] {
				end = r.match(r.next(i))
			}
			if !r.is(r.next(end), tkPunct, "(") {
				continue
			}
			from := i
			qual := ""
			if r.is(pv, tkPunct, "::") {
				if !r.is(r.prev(pv), tkIdent, "metal") {
					continue
				}
				from = r.prev(pv)
				qual = "::metal::"
			}
			name := strings.Join(strings.Fields(r.text(i, end+1)), " ")
			if vecTypes[tk.text] || tk.text == "vec" {
				qual = "::metal::"
			}
			r.replace(from, end+1, "::metal::emu_detail::make<"+qual+name+">")
			r.wrapComparisons(r.next(end))
			continue
		}
		// T(x) for a template type parameter T (a vector type when instantiated, perhaps).
		if tk.kind == tkIdent && !member && !r.is(pv, tkPunct, "::") && typeParamAt(tps, i, tk.text) && r.is(r.next(i), tkPunct, "(") &&
			r.sc.kind[i].inFunction() && !r.boundary(pv) && !r.is(pv, tkIdent, "const") {
			open := r.next(i)
			cl := r.match(open)
			if topLevelIndex(r.text(open+1, cl), ',') < 0 && cl > r.next(open) {
				r.wrapComparisons(open)
				r.setText(i, "(::metal::emu_detail::caster<"+tk.text+">() ->* ")
				r.t[cl].post += ")"
			}
			continue
		}
		// static_cast<V>(x) for a vector type V.
		if tk.kind == tkIdent && tk.text == "static_cast" {
			lt := r.next(i)
			ty := r.next(lt)
			if r.is(ty, tkIdent, "metal") && r.is(r.next(ty), tkPunct, "::") {
				ty = r.next(r.next(ty))
			}
			gt := r.next(ty)
			if r.is(lt, tkPunct, "<") && isVec(ty) && r.is(gt, tkPunct, ">") {
				r.replace(i, gt+1, "::metal::emu_detail::make<"+vecName(r, ty)+">")
				if r.is(r.next(gt), tkPunct, "(") {
					r.wrapComparisons(r.next(gt))
				}
			}
			continue
		}
		// (V)x: a C cast to a vector type, a vector alias, vec<T, N> or a template type parameter.
		if tk.kind == tkPunct && tk.text == "(" {
			ty := r.next(i)
			qual := ""
			if r.is(ty, tkIdent, "metal") && r.is(r.next(ty), tkPunct, "::") {
				ty = r.next(r.next(ty))
				qual = "::metal::"
			}
			if ty >= len(r.t) || r.t[ty].kind != tkIdent {
				continue
			}
			end := ty
			if r.t[ty].text == "vec" && r.is(r.next(ty), tkPunct, "<") {
				end = r.match(r.next(ty))
				qual = "::metal::"
			} else if !isVec(ty) && !typeParamAt(tps, ty, r.t[ty].text) {
				continue
			}
			cl := r.next(end)
			if !r.is(cl, tkPunct, ")") {
				continue
			}
			if pv >= 0 && (r.t[pv].kind == tkIdent && r.t[pv].text != "return" && r.t[pv].text != "co_return" ||
				r.is(pv, tkPunct, ")") || r.is(pv, tkPunct, "]") || r.t[pv].kind == tkAttr) {
				continue // a call, sizeof(T), or a declaration
			}
			nx := r.next(cl)
			if nx >= len(r.t) {
				continue
			}
			if n := r.t[nx]; n.kind == tkPunct && !strings.Contains("(-+!~*&", n.text) {
				continue
			}
			name := strings.Join(strings.Fields(r.text(ty, end+1)), " ")
			if vecTypes[r.t[ty].text] {
				qual = "::metal::"
			}
			r.replace(i, cl+1, "::metal::emu_detail::caster<"+qual+name+">() ->* ")
			if r.is(nx, tkPunct, "(") {
				r.wrapComparisons(nx)
			}
		}
	}
}

func vecName(r *rewriter, i int) string {
	if vecTypes[r.t[i].text] {
		return "::metal::" + r.t[i].text
	}
	return r.t[i].text
}

// collectVecAliases records `typedef V name;` and `using name = V;` where V is a vector type, an
// alias of one, or vec<...>.
func (r *rewriter) collectVecAliases() {
	isVecType := func(from, to int) bool {
		var ids []string
		for k := from; k < to; k++ {
			t := r.t[k]
			if t.kind == tkIdent && t.text != "const" && t.text != "metal" && t.text != "typename" {
				ids = append(ids, t.text)
			}
			if t.kind == tkPunct && (t.text == "*" || t.text == "&" || t.text == "(" || t.text == "[") {
				return false
			}
		}
		if len(ids) == 0 {
			return false
		}
		return vecTypes[ids[0]] && len(ids) == 1 || r.vecAliases[ids[0]] && len(ids) == 1 || ids[0] == "vec"
	}
	for i := 0; i < len(r.t); i++ {
		switch {
		case r.is(i, tkIdent, "typedef"):
			e := r.findPunct(i, ";")
			if e < 0 {
				return
			}
			name := r.prev(e)
			if r.t[name].kind == tkIdent && isVecType(r.next(i), name) {
				r.vecAliases[r.t[name].text] = true
			}
			i = e
		case r.is(i, tkIdent, "using"):
			name := r.next(i)
			eq := r.next(name)
			if r.t[name].kind != tkIdent || !r.is(eq, tkPunct, "=") {
				continue
			}
			e := r.findPunct(eq, ";")
			if e < 0 {
				return
			}
			if isVecType(eq+1, e) {
				r.vecAliases[r.t[name].text] = true
			}
			i = e
		}
	}
}

// scalarTypeNames are the names whose unqualified pointers and references the pre-pass qualifies.
var scalarTypeNames = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range []string{"float", "half", "bfloat", "int", "uint", "short", "ushort", "char", "uchar", "long",
		"ulong", "bool", "size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
		"uint32_t", "uint64_t", "unsigned", "signed", "void"} {
		m[t] = true
	}
	for v := range vecTypes {
		m[v] = true
	}
	return m
}()

// threadPointers qualifies unqualified pointers to scalar, vector and (non-template) struct types
// outside classes as thread: MSL's meaning of them, which C++ for OpenCL would take as generic
// (convertible from any address space). Pointers to template parameters and other dependent
// types, references and class members stay generic (see threadReferences).
func (r *rewriter) threadPointers() {
	structs := map[string]bool{}
	for i := 0; i+1 < len(r.t); i++ {
		if (r.is(i, tkIdent, "struct") || r.is(i, tkIdent, "class") || r.is(i, tkIdent, "union")) && r.sc.kind[i] != scInit {
			n := r.next(i)
			if n < len(r.t) && r.t[n].kind == tkIdent && !r.is(r.next(n), tkPunct, "<") && !r.is(r.prev(i), tkPunct, "<") &&
				!r.is(r.prev(i), tkPunct, ",") {
				structs[r.t[n].text] = true
			}
		}
	}
	tps := r.templateScopes()
	for i := 0; i < len(r.t); i++ {
		t := r.t[i]
		if t.kind != tkPunct || t.text != "*" || r.sc.inClass[i] {
			continue // (references and class members stay generic; see threadReferences)
		}
		if r.is(i+1, tkPunct, "&") || r.is(i-1, tkPunct, "&") || r.is(i+1, tkPunct, "=") {
			continue
		}
		nx := r.next(i)
		if nx >= len(r.t) || !(r.t[nx].kind == tkIdent || r.is(nx, tkPunct, ")") || r.is(nx, tkPunct, ",") || r.is(nx, tkPunct, ">")) {
			continue
		}
		if r.is(nx, tkPunct, ",") || r.is(nx, tkPunct, ">") {
			continue // a type in a template argument list
		}
		// The declaration specifiers before the '*' or '&'.
		start := i
		hasType := false
		ok := true
		for k := r.prev(i); k >= 0; k = r.prev(k) {
			tk := r.t[k]
			if tk.kind == tkIdent {
				switch {
				case tk.text == "const" || tk.text == "volatile":
				case scalarTypeNames[tk.text] || structs[tk.text] && !typeParamAt(tps, k, tk.text):
					if hasType && !(tk.text == "unsigned" || tk.text == "signed" || tk.text == "long" || tk.text == "short" ||
						tk.text == "int" || tk.text == "char") {
						ok = false
					}
					hasType = true
				case tk.text == "metal" && r.is(r.next(k), tkPunct, "::"):
				case addressSpaces[tk.text] || strings.HasPrefix(tk.text, "__") || tk.text == "constexpr" || tk.text == "static":
					ok = false
				default:
					// a variable, a function name, return, sizeof ...: not a declaration
					ok = false
				}
				if !ok {
					break
				}
				start = k
				continue
			}
			if tk.kind == tkPunct && tk.text == "::" {
				start = k
				continue
			}
			if tk.kind == tkPunct && (tk.text == "(" || tk.text == "," || tk.text == ";" || tk.text == "{" || tk.text == "}") || tk.kind == tkDirective || tk.kind == tkAttr {
				break
			}
			ok = false
			break
		}
		if !ok || !hasType || start == i {
			continue
		}
		pv := r.prev(start)
		if pv >= 0 && r.is(pv, tkPunct, "(") {
			// `(float*)x` casts, `f(float* p)` parameters; not `sizeof(float*)` or `decltype(...)`.
			if b := r.prev(pv); b >= 0 && r.t[b].kind == tkIdent && (r.t[b].text == "sizeof" || r.t[b].text == "alignof" || r.t[b].text == "decltype") {
				continue
			}
		}
		r.setText(start, "thread "+r.t[start].text)
	}
}

// matmulDescriptors wraps the first template argument of mpp::tensor_ops::matmul2d (a
// matmul2d_descriptor, a class-type template argument C++17 lacks) in emu_pack.
func (r *rewriter) matmulDescriptors() {
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "matmul2d") {
			continue
		}
		pv := r.prev(i)
		if r.is(pv, tkPunct, ".") || r.is(pv, tkPunct, ">") && r.is(pv-1, tkPunct, "-") {
			continue
		}
		lt := r.next(i)
		if !r.is(lt, tkPunct, "<") {
			continue
		}
		gt := r.match(lt)
		depth := 0
		end := gt
		for k := lt + 1; k < gt; k++ {
			if r.t[k].kind != tkPunct {
				continue
			}
			switch r.t[k].text {
			case "(", "[", "<", "{":
				depth++
			case ")", "]", ">", "}":
				depth--
			case ",":
				if depth == 0 && end == gt {
					end = k
				}
			}
		}
		first := r.next(lt)
		r.setText(first, "::mpp::tensor_ops::emu_pack("+r.t[first].text)
		last := r.prev(end)
		r.setText(last, r.t[last].text+")")
		i = gt
	}
}

// openclKeywords are identifiers in MSL that C++ for OpenCL reserves (address-space and access
// keywords, builtin type names); the pre-pass renames them.
var openclKeywords = map[string]bool{"local": true, "global": true, "generic": true, "read_only": true,
	"write_only": true, "read_write": true, "pipe": true, "sampler_t": true, "event_t": true, "queue_t": true,
	"clk_event_t": true, "reserve_id_t": true, "image1d_t": true, "image1d_array_t": true, "image1d_buffer_t": true,
	"image2d_t": true, "image2d_array_t": true, "image3d_t": true, "image2d_depth_t": true,
	"image2d_array_depth_t": true, "image2d_msaa_t": true, "image2d_array_msaa_t": true,
	"image2d_msaa_depth_t": true, "image2d_array_msaa_depth_t": true}

// openclAtomics are MSL's atomic type names, which C++ for OpenCL also declares at global scope:
// an unqualified use would be ambiguous with metal::'s.
var openclAtomics = map[string]bool{"atomic_int": true, "atomic_uint": true, "atomic_float": true,
	"atomic_bool": true, "atomic_long": true, "atomic_ulong": true, "atomic_flag": true}

// openclNames renames the identifiers C++ for OpenCL reserves and qualifies MSL's atomic types.
func (r *rewriter) openclNames() {
	for i := range r.t {
		t := r.t[i]
		if t.kind != tkIdent {
			continue
		}
		if openclKeywords[t.text] {
			r.setText(i, "emu_kw_"+t.text)
			continue
		}
		// reinterpret_cast<T&>(x): clang 16 crashes generating a reinterpret_cast of an lvalue to
		// a reference of another address space (thread x to a generic T&); ref_cast casts the
		// pointer instead.
		if t.text == "reinterpret_cast" && r.is(r.next(i), tkPunct, "<") {
			if gt := r.match(r.next(i)); r.is(gt, tkPunct, ">") && r.is(r.prev(gt), tkPunct, "&") {
				r.setText(i, "::metal::emu_detail::ref_cast")
				continue
			}
		}
		// coherent(device|system) (MSL 3.2): the emulator's memory is always coherent.
		if t.text == "coherent" && r.is(r.next(i), tkPunct, "(") {
			r.replace(i, r.match(r.next(i))+1, "")
			continue
		}
		if openclAtomics[t.text] && !r.is(r.prev(i), tkPunct, "::") && !r.is(r.prev(i), tkPunct, ".") {
			r.setText(i, "::metal::"+t.text)
		}
	}
}

// functionPointerParams rewrites template parameters of function pointer type, `R (*name)(A)`
// and `F name` for an alias F of a function pointer type, as function references `R (&name)(A)`:
// C++ for OpenCL gives a function pointer parameter a generic pointee and then refuses every
// function as its argument; a reference parameter takes them, function templates included.
func (r *rewriter) functionPointerParams() {
	r.fnAliases = map[string]fnAlias{}
	for i := 0; i < len(r.t); i++ {
		// template <class T> using F = R (*)(A);
		if !r.is(i, tkIdent, "using") {
			continue
		}
		name, eq := r.next(i), r.next(r.next(i))
		if r.t[name].kind != tkIdent || !r.is(eq, tkPunct, "=") {
			continue
		}
		e := r.findPunct(eq, ";")
		if e < 0 {
			continue
		}
		def := strings.Join(strings.Fields(r.text(eq+1, e)), " ")
		k := strings.Index(def, "(*)")
		if k < 0 || !strings.HasPrefix(strings.TrimSpace(def[k+3:]), "(") {
			continue
		}
		al := fnAlias{ret: strings.TrimSpace(def[:k]), args: strings.TrimSpace(def[k+3:])}
		if ts := r.stmtStart(i); r.is(ts, tkIdent, "template") {
			lt := r.next(ts)
			for _, p := range splitTop(r.text(lt+1, r.match(lt)), ',') {
				f := strings.Fields(strings.Split(p, "=")[0])
				if len(f) > 0 {
					al.params = append(al.params, f[len(f)-1])
				}
			}
		}
		r.fnAliases[r.t[name].text] = al
	}
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "template") {
			continue
		}
		lt := r.next(i)
		if !r.is(lt, tkPunct, "<") {
			continue
		}
		gt := r.match(lt)
		start := r.next(lt)
		depth := 0
		for k := start; k <= gt; k++ {
			t := r.t[k]
			if t.kind == tkPunct {
				switch t.text {
				case "(", "[", "{":
					depth++
				case ")", "]", "}":
					depth--
				case "<":
					if k != lt {
						depth++
					}
				case ">":
					if k != gt && !r.is(k-1, tkPunct, "-") {
						depth--
					}
				}
			}
			if k == gt || depth == 0 && r.is(k, tkPunct, ",") {
				r.functionPointerParam(start, k)
				start = r.next(k)
			}
		}
		i = gt
	}
}

// fnAlias is `template <P...> using F = ret (*)(args);`.
type fnAlias struct {
	params    []string
	ret, args string
}

// functionPointerParam rewrites the template parameter [from, to) if it is `R (*name)(params)`
// or `F<A...> name` for a function pointer alias F.
func (r *rewriter) functionPointerParam(from, to int) {
	if from < len(r.t) && r.t[from].kind == tkIdent {
		if al, ok := r.fnAliases[r.t[from].text]; ok {
			last := r.prev(to)
			if eq := r.findPunct(from, "="); eq >= 0 && eq < to {
				last = r.prev(eq)
			}
			if last <= from || r.t[last].kind != tkIdent {
				return
			}
			var args []string
			if nx := r.next(from); r.is(nx, tkPunct, "<") {
				args = splitTop(r.text(nx+1, r.match(nx)), ',')
			}
			sub := map[string]string{}
			for k, p := range al.params {
				if k < len(args) {
					sub[p] = strings.TrimSpace(args[k])
				}
			}
			var b strings.Builder
			for _, t := range tokenize(al.ret + " (&" + r.t[last].text + ")" + al.args) {
				if v, ok := sub[t.text]; ok && t.kind == tkIdent {
					b.WriteString(v)
				} else {
					b.WriteString(t.text)
				}
			}
			r.replace(from, last+1, b.String())
			return
		}
	}
	for k := from; k < to; k++ {
		if !r.is(k, tkPunct, "(") {
			continue
		}
		star := r.next(k)
		name := r.next(star)
		cl := r.next(name)
		op := r.next(cl)
		if !r.is(star, tkPunct, "*") || r.t[name].kind != tkIdent || !r.is(cl, tkPunct, ")") || !r.is(op, tkPunct, "(") {
			return
		}
		r.setText(star, "&")
		return
	}
}

// methodQualifiers adjusts address-space qualifiers of member functions to C++ for OpenCL:
// `thread` (an object in thread memory, temporaries and return values included, which C++ for
// OpenCL leaves unqualified) becomes the generic default; `constant` on a constructor becomes
// __constant alone (a constructor cannot be const).
func (r *rewriter) methodQualifiers() {
	for i := range r.t {
		t := r.t[i]
		if t.kind != tkIdent || t.text != "thread" && t.text != "constant" {
			continue
		}
		pv := r.prev(i)
		if r.is(pv, tkIdent, "const") || r.is(pv, tkIdent, "volatile") {
			pv = r.prev(pv)
		}
		if !r.is(pv, tkPunct, ")") {
			continue
		}
		nx := r.next(i)
		if nx >= len(r.t) {
			continue
		}
		if n := r.t[nx]; !(n.kind == tkPunct && (n.text == "{" || n.text == ":" || n.text == ";" || n.text == "=" || n.text == "-" || n.text == "&") ||
			n.kind == tkIdent && (n.text == "noexcept" || n.text == "const" || n.text == "override") || n.kind == tkAttr) {
			continue
		}
		open := r.matchBack(pv)
		name := r.prev(open)
		if r.is(name, tkPunct, ")") && r.is(r.prev(name), tkPunct, "(") && r.is(r.prev(r.prev(name)), tkIdent, "operator") {
			name = r.prev(r.prev(name)) // operator()
		}
		if name < 0 || !(r.t[name].kind == tkIdent || r.is(name, tkPunct, ">") || r.is(name, tkPunct, "]")) {
			continue
		}
		if r.sc.kind[i] != scClass && !r.is(r.prev(name), tkPunct, "::") {
			continue // a function type or a cast, not a member function
		}
		if t.text == "thread" {
			r.setText(i, "")
		} else if r.isConstructor(name) {
			r.setText(i, "__constant")
		}
	}
}

// isConstructor reports whether the function name at i declares a constructor: nothing but
// specifiers or a template head before it (no return type).
func (r *rewriter) isConstructor(i int) bool {
	if r.t[i].kind != tkIdent || r.t[i].text == "operator" {
		return false
	}
	pv := r.prev(i)
	if r.is(pv, tkPunct, "~") {
		return false
	}
	for pv >= 0 && r.t[pv].kind == tkIdent && (r.t[pv].text == "constexpr" || r.t[pv].text == "explicit" ||
		r.t[pv].text == "inline" || r.t[pv].text == "METAL_FUNC") {
		pv = r.prev(pv)
	}
	if pv < 0 || r.boundary(pv) || r.is(pv, tkPunct, ":") || r.t[pv].kind == tkAttr {
		return true
	}
	if r.is(pv, tkPunct, ">") {
		// `template <...> X(...)`: the '>' closes a template head.
		d := 0
		for k := pv; k >= 0; k-- {
			if r.is(k, tkPunct, ">") {
				d++
			} else if r.is(k, tkPunct, "<") {
				d--
				if d == 0 {
					return r.is(r.prev(k), tkIdent, "template")
				}
			}
		}
	}
	return false
}

// vectorInits rewrites what clang does not take in vector initialization inside functions:
// `float2 v(a, b);` (direct initialization), `uint4 k = {a, b, c};` (fewer elements than the
// vector has, the rest zero), and braced lists passed as function arguments, f({x, y, z}), which
// convert to the parameter's vector (or aggregate) type.
func (r *rewriter) vectorInits() {
	isVec := func(i int) bool {
		t := r.t[i]
		return t.kind == tkIdent && (vecTypes[t.text] || r.vecAliases[t.text])
	}
	for i := 0; i < len(r.t); i++ {
		if !r.sc.kind[i].inFunction() {
			continue
		}
		t := r.t[i]
		// vec<T, N> (or metal::vec<T, N>) as a declaration's type.
		vecTmpl := t.kind == tkIdent && t.text == "vec" && r.is(r.next(i), tkPunct, "<") && !r.is(r.prev(i), tkPunct, ".") &&
			(!r.is(r.prev(i), tkPunct, "::") || r.is(r.prev(r.prev(i)), tkIdent, "metal"))
		if vecTmpl || t.kind == tkIdent && isVec(i) && !r.is(r.prev(i), tkPunct, "::") && !r.is(r.prev(i), tkPunct, ".") {
			typeEnd := i
			qual := r.t[i].text
			if vecTypes[qual] {
				qual = "::metal::" + qual
			}
			first := i
			if vecTmpl {
				typeEnd = r.match(r.next(i))
				qual = "::metal::" + r.emitted(i, typeEnd+1)
				if r.is(r.prev(i), tkPunct, "::") {
					first = r.prev(r.prev(i))
				}
			}
			name := r.next(typeEnd)
			if name >= len(r.t) || r.t[name].kind != tkIdent {
				continue
			}
			nx := r.next(name)
			if vecTmpl && !r.boundary(r.prev(first)) && !r.is(r.prev(first), tkIdent, "const") {
				continue
			}
			switch {
			case r.is(nx, tkPunct, "{"):
				// `float2 v{0}`, `vec<T, 2> v{a}`: list initialization, the rest zero.
				cl := r.match(nx)
				r.setText(nx, " = ::metal::emu_detail::make_list<"+qual+">(")
				r.setText(cl, ")")
				i = cl
				continue
			case r.is(nx, tkPunct, "("):
				pv := r.prev(i)
				if r.boundary(pv) || r.is(pv, tkIdent, "const") || r.is(pv, tkIdent, "constexpr") || r.is(pv, tkPunct, ":") {
					r.setText(name, r.t[name].text+" = ::metal::emu_detail::make<"+qual+">")
				}
			case r.is(nx, tkPunct, "=") && r.is(r.next(nx), tkPunct, "{"):
				open := r.next(nx)
				cl := r.match(open)
				r.setText(open, "::metal::emu_detail::make_list<"+qual+">(")
				r.setText(cl, ")")
				i = cl
				// Later declarators of the statement: `float4 a = {0}, b = {0};`.
				for k := r.next(cl); r.is(k, tkPunct, ","); {
					nm := r.next(k)
					eq := r.next(nm)
					br := r.next(eq)
					if r.t[nm].kind != tkIdent || !r.is(eq, tkPunct, "=") || !r.is(br, tkPunct, "{") {
						break
					}
					bc := r.match(br)
					r.setText(br, "::metal::emu_detail::make_list<"+qual+">(")
					r.setText(bc, ")")
					i, k = bc, r.next(bc)
				}
			}
			continue
		}
		if t.kind == tkPunct && t.text == "{" && (r.is(r.prev(i), tkPunct, "(") || r.is(r.prev(i), tkPunct, ",")) && r.inCall(i) {
			cl := r.match(i)
			r.setText(i, "::metal::emu_detail::ilist(")
			r.setText(cl, ")")
		}
	}
}

// inCall reports whether token i is directly inside the argument list of a function call.
func (r *rewriter) inCall(i int) bool {
	d := 0
	for k := i - 1; k >= 0; k-- {
		t := r.t[k]
		if t.kind != tkPunct {
			continue
		}
		switch t.text {
		case ")", "]", "}":
			d++
		case "[", "{":
			if d == 0 {
				return false
			}
			d--
		case "(":
			if d > 0 {
				d--
				continue
			}
			f := r.prev(k)
			if f < 0 {
				return false
			}
			if r.t[f].kind == tkIdent {
				switch r.t[f].text {
				case "if", "for", "while", "switch", "return", "sizeof", "alignof", "decltype", "static_assert":
					return false
				}
				return true
			}
			return r.is(f, tkPunct, ">") || r.is(f, tkPunct, ")")
		case ";":
			return false
		}
	}
	return false
}

// threadReferences drops the thread qualifier of reference types (thread const T& x) and inside
// class bodies: MSL binds temporaries to thread references and calls thread member functions on
// them, C++ for OpenCL's temporaries carry no address space, so only generic references and
// member functions take them. Thread pointers outside classes stay thread (checked).
func (r *rewriter) threadReferences() {
	for i := range r.t {
		if !r.is(i, tkIdent, "thread") {
			continue
		}
		if r.sc.inClass[i] {
			// In a class (members and member functions, whose object is generic), thread is the
			// generic default too: explicitly so on pointers and array parameters (`thread U
			// dst[N]` then deduces U without an address space), dropped elsewhere (references,
			// which bind temporaries only when unqualified, and locals).
			r.setText(i, "")
			if p := r.declaratorPunct(i); p == "*" || p == "[" && r.pdepth[i] > 0 {
				r.setText(i, "__generic")
			}
			continue
		}
		depth := 0
		for k := r.next(i); k < len(r.t); k = r.next(k) {
			t := r.t[k]
			if t.kind == tkIdent || t.kind == tkSpace || t.kind == tkPunct && t.text == "::" {
				continue
			}
			if t.kind != tkPunct {
				break
			}
			if t.text == "<" {
				depth++
				continue
			}
			if t.text == ">" && depth > 0 {
				depth--
				continue
			}
			if depth > 0 && t.text == "," {
				continue
			}
			if depth == 0 && t.text == "&" {
				r.setText(i, "")
			}
			break
		}
	}
}

// declaratorPunct returns the first punctuation after the type that the qualifier at i begins
// (identifiers, ::, template argument lists and a declarator's name skipped): * or & for a pointer
// or reference, [ for an array.
func (r *rewriter) declaratorPunct(i int) string {
	for k := r.next(i); k < len(r.t); k = r.next(k) {
		t := r.t[k]
		switch {
		case t.kind == tkIdent || t.kind == tkPunct && t.text == "::":
		case t.kind == tkPunct && t.text == "<":
			k = r.match(k)
		case t.kind == tkPunct:
			return t.text
		default:
			return ""
		}
	}
	return ""
}

// constantClassVariables declares variables in the constant address space whose type is not a
// scalar or vector (a class, a template parameter) as __global const: C++ for OpenCL cannot copy
// a class object out of its __constant space (the implicit copy constructor takes a generic
// reference), which MSL kernels do (MLX: `static constexpr constant U init = ...; out = init;`).
// They stay read-only; only their address no longer converts to a constant pointer.
func (r *rewriter) constantClassVariables() {
	for i := range r.t {
		if !r.is(i, tkIdent, "constant") {
			continue
		}
		if k := r.sc.kind[i]; k == scInit || k == scEnum {
			continue
		}
		// A declaration: the statement's specifiers up to its name, and no '*', '&' or '(' before it.
		s := r.stmtStart(i)
		if r.is(s, tkIdent, "template") {
			continue
		}
		inSpecifiers := true
		for k := s; k < i; k++ {
			if r.t[k].kind == tkPunct || r.t[k].kind == tkAttr {
				inSpecifiers = false
			}
		}
		if !inSpecifiers {
			continue // constant in an expression (a cast) or after a declarator
		}
		scalar, decl := false, false
		for k := s; k < len(r.t); k = r.next(k) {
			t := r.t[k]
			if t.kind == tkAttr {
				break
			}
			if t.kind == tkPunct {
				decl = t.text == "=" || t.text == ";" || t.text == "[" || t.text == "{"
				if t.text == "<" {
					k = r.match(k)
					continue
				}
				if t.text == "::" {
					continue
				}
				break
			}
			if t.kind == tkIdent && scalarTypeNames[t.text] {
				scalar = true
			}
		}
		if decl && !scalar {
			r.setText(i, "__global const")
		}
	}
}

// floatLiterals gives unsuffixed floating-point literals the f suffix: MSL has no double, its
// 1.5 is a float (C++ for OpenCL would deduce double for it and then convert).
func (r *rewriter) floatLiterals() {
	for i := range r.t {
		t := r.t[i]
		if t.kind != tkNumber {
			continue
		}
		s := strings.ToLower(t.text)
		hex := strings.HasPrefix(s, "0x")
		isFloat := strings.Contains(s, ".") || !hex && strings.Contains(s, "e") || hex && strings.Contains(s, "p")
		if !isFloat {
			continue
		}
		last := s[len(s)-1]
		if last == 'f' || last == 'h' || last == 'l' || strings.HasSuffix(s, "bf") {
			continue
		}
		r.setText(i, t.text+"f")
	}
}

// deducibleVecs writes vec<T, N> as the vector type itself in the argument list of a class
// template partial specialization, where its template parameters must be deducible (vec is an
// alias through a class, to cover bfloat and bool vectors).
func (r *rewriter) deducibleVecs() {
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "template") || !r.is(r.next(i), tkPunct, "<") {
			continue
		}
		gt := r.match(r.next(i))
		kw := r.next(gt)
		if !(r.is(kw, tkIdent, "struct") || r.is(kw, tkIdent, "class")) {
			continue
		}
		name := r.next(kw)
		lt := r.next(name)
		if r.t[name].kind != tkIdent || !r.is(lt, tkPunct, "<") {
			continue
		}
		end := r.match(lt)
		for k := lt + 1; k < end; k++ {
			if !r.is(k, tkIdent, "vec") || !r.is(r.next(k), tkPunct, "<") {
				continue
			}
			from := k
			if r.is(r.prev(k), tkPunct, "::") && r.is(r.prev(r.prev(k)), tkIdent, "metal") {
				from = r.prev(r.prev(k))
			}
			vlt := r.next(k)
			vgt := r.match(vlt)
			args := splitTop(r.text(vlt+1, vgt), ',')
			if len(args) != 2 {
				continue
			}
			r.replace(from, vgt+1, strings.TrimSpace(args[0])+" __attribute__((ext_vector_type("+strings.TrimSpace(args[1])+")))")
			k = vgt
		}
	}
}

// staticMemberDefinitions deletes `constant constexpr T X<A>::m[8];`: the out-of-line definition of
// a static constexpr member, redundant since C++17 (the member is inline), which C++ for OpenCL
// refuses for lack of an initializer.
func (r *rewriter) staticMemberDefinitions() {
	for i := 0; i < len(r.t); i++ {
		if r.sc.kind[i] != scNamespace || r.pdepth[i] != 0 || !r.is(i, tkIdent, "constant") && !r.is(i, tkIdent, "constexpr") ||
			!r.boundary(r.prev(i)) {
			continue
		}
		e := r.findPunct(i, ";")
		if e < 0 {
			return
		}
		stmt := r.text(i, e)
		if !strings.Contains(stmt, "constexpr") || !strings.Contains(stmt, "::") || strings.ContainsAny(stmt, "=({") {
			continue
		}
		r.replace(i, e+1, "")
		i = e
	}
}

// wrapComparisons wraps each argument in the parentheses at open that is a comparison (a == b,
// x > 0) in ::metal::emu_detail::cmp, which gives bool vectors for vector comparisons.
func (r *rewriter) wrapComparisons(open int) {
	cl := r.match(open)
	start := r.next(open)
	depth := 0
	for k := start; k <= cl; k++ {
		t := r.t[k]
		if t.kind == tkPunct {
			switch t.text {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			case "<":
				if gt := r.templateClose(k); gt > 0 && gt < cl {
					k = gt
					continue
				}
			}
		}
		if k == cl || depth == 0 && r.is(k, tkPunct, ",") {
			if k > start && r.isComparison(start, k) {
				r.t[start].pre = "::metal::emu_detail::cmp(" + r.t[start].pre
				last := r.prev(k)
				r.t[last].post += ")"
			}
			start = r.next(k)
		}
	}
}

// templateClose returns the > closing the template argument list that the < at i opens, or -1
// when i is not plainly one: the < follows a cast keyword, as_type or vec, or its match is followed
// by ( or ::.
func (r *rewriter) templateClose(i int) int {
	p := r.prev(i)
	if p < 0 || r.t[p].kind != tkIdent || r.is(i+1, tkPunct, "<") || r.is(i+1, tkPunct, "=") {
		return -1
	}
	gt := r.match(i)
	if gt >= len(r.t)-1 || !r.is(gt, tkPunct, ">") {
		return -1
	}
	for k := i + 1; k < gt; k++ {
		if r.is(k, tkPunct, ";") || r.is(k, tkPunct, "{") || r.is(k, tkPunct, "}") {
			return -1
		}
	}
	name := r.t[p].text
	if strings.HasSuffix(name, "_cast") || name == "as_type" || name == "vec" {
		return gt
	}
	if n := r.next(gt); n < len(r.t) && (r.is(n, tkPunct, "(") || r.is(n, tkPunct, "::")) {
		return gt
	}
	return -1
}

// isComparison reports whether tokens [from, to) are a comparison at their top level: ==, !=, <=,
// >=, or a < or > that closes no template argument list.
func (r *rewriter) isComparison(from, to int) bool {
	depth, angles := 0, 0
	for k := from; k < to; k++ {
		t := r.t[k]
		if t.kind != tkPunct {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		}
		if depth != 0 {
			continue
		}
		nx := ""
		if k+1 < to {
			nx = r.t[k+1].text
		}
		switch {
		case (t.text == "=" || t.text == "!") && nx == "=":
			if t.text == "!" || k > from && r.t[k-1].text != "=" && r.t[k-1].text != "<" && r.t[k-1].text != ">" && r.t[k-1].text != "!" {
				return true
			}
		case (t.text == "<" || t.text == ">") && nx == "=":
			return true
		case t.text == "<":
			if r.t[k-1].text == "<" || nx == "<" {
				continue // a shift
			}
			angles++
		case t.text == ">":
			if r.is(k-1, tkPunct, "-") || r.t[k-1].text == ">" || nx == ">" {
				continue // -> or a shift
			}
			if angles > 0 {
				angles--
			} else {
				return true
			}
		}
	}
	return angles > 0
}

// localTypeParams declares local variables whose type is a template type parameter (`T w = a;`)
// as remove_addrspace_t<T>: a parameter deduced from a generic reference carries the generic
// address space in C++ for OpenCL (never in MSL), which a local variable cannot have.
func (r *rewriter) localTypeParams() {
	tps := r.templateScopes()
	for i := 0; i < len(r.t); i++ {
		t := r.t[i]
		if t.kind != tkIdent || r.sc.funcOf[i] < 0 || !r.sc.kind[i].inFunction() || !typeParamAt(tps, i, t.text) {
			continue
		}
		nx := r.next(i)
		if nx >= len(r.t) || r.t[nx].kind != tkIdent || addressSpaces[r.t[nx].text] || r.t[nx].text == "const" {
			continue
		}
		pv := r.prev(i)
		if r.is(pv, tkIdent, "const") {
			pv = r.prev(pv)
		}
		if !(r.is(pv, tkPunct, ";") || r.is(pv, tkPunct, "{") || r.is(pv, tkPunct, "}") || r.is(pv, tkPunct, "(") && r.is(r.prev(pv), tkIdent, "for")) {
			continue
		}
		if a := r.next(nx); !(r.is(a, tkPunct, "=") || r.is(a, tkPunct, ";") || r.is(a, tkPunct, "[") || r.is(a, tkPunct, "{") || r.is(a, tkPunct, ",")) {
			continue
		}
		r.t[i].pre = "::metal::remove_addrspace_t<" + r.t[i].pre
		r.t[i].post += ">"
	}
}

// conditionals wraps the second and third operands of each conditional expression in a function
// (c ? a : b) in ::metal::emu_detail::cond_op, which gives a class operand as a value of its type
// without address space (a swizzle as its vector) and passes others through: MSL takes
// `c ? tg_vals[i] : op.init`, threadgroup and device complex values, as a value, which C++ for
// OpenCL finds ambiguous. An expression statement (`c ? f() : g();`, possibly void) is left.
func (r *rewriter) conditionals() {
	isEnd := func(k int) bool {
		t := r.t[k]
		return t.kind == tkPunct && (t.text == "," || t.text == ";" || t.text == ")" || t.text == "]" || t.text == "}" || t.text == ":")
	}
	// branchEnd returns the token ending the operand that starts at k: a depth-0 end token (':'
	// of a nested conditional's own skipped).
	branchEnd := func(k int) int {
		nested := 0
		for ; k < len(r.t); k++ {
			t := r.t[k]
			if t.kind != tkPunct {
				continue
			}
			switch t.text {
			case "(", "[", "{":
				k = r.match(k)
				continue
			case "<":
				if gt := r.templateClose(k); gt > 0 {
					k = gt
				}
				continue
			case "?":
				nested++
				continue
			}
			if t.text == ":" && nested > 0 {
				nested--
				continue
			}
			if isEnd(k) {
				return k
			}
		}
		return -1
	}
	// From the last: a nested conditional is rewritten before the one containing it, whose
	// literal operand's decltype copies the other operand's rewritten text.
	for i := len(r.t) - 1; i >= 0; i-- {
		if !r.is(i, tkPunct, "?") || r.sc.funcOf[i] < 0 || r.sc.kind[i] == scInit {
			continue
		}
		if r.inTemplateArgs(i) {
			continue // a constant expression: BlockMMA<..., t ? BK : BN>
		}
		colon := branchEnd(r.next(i))
		if colon < 0 || !r.is(colon, tkPunct, ":") {
			continue
		}
		end := branchEnd(r.next(colon))
		if end < 0 {
			continue
		}
		if r.is(end, tkPunct, ";") && r.exprStatement(i) {
			continue
		}
		br := [2][2]int{{r.next(i), r.prev(colon)}, {r.next(colon), r.prev(end)}}
		if br[0][0] > br[0][1] || br[1][0] > br[1][1] {
			continue
		}
		lit := [2]bool{r.numberLiteral(br[0][0], br[0][1]), r.numberLiteral(br[1][0], br[1][1])}
		for _, b := range br {
			r.t[b[0]].pre = "::metal::emu_detail::cond_op(" + r.t[b[0]].pre
			r.t[b[1]].post += ")"
		}
		// A number literal against another operand has that operand's type when it is a class
		// (c ? bf : 0 is a bfloat, as bfloat is arithmetic in MSL); it stays a number otherwise.
		if lit[0] != lit[1] {
			l, o := br[0], br[1]
			if lit[1] {
				l, o = br[1], br[0]
			}
			r.t[l[0]].pre = "::metal::emu_detail::cond_lit<decltype(" + r.emitted(o[0], o[1]+1) + ")>(" + r.t[l[0]].pre
			r.t[l[1]].post += ")"
		}
	}
}

// numberLiteral reports whether tokens [from, to] are a number, possibly signed.
func (r *rewriter) numberLiteral(from, to int) bool {
	if r.is(from, tkPunct, "-") || r.is(from, tkPunct, "+") {
		from = r.next(from)
	}
	return from == to && r.t[from].kind == tkNumber
}

// emitted returns tokens [i, j) as the pre-pass emits them (their rewrites included).
func (r *rewriter) emitted(i, j int) string {
	var b strings.Builder
	for k := i; k < j; k++ {
		t := r.t[k]
		b.WriteString(t.pre)
		if t.kind == tkSpace || t.kind == tkDirective {
			b.WriteByte(' ')
		} else {
			b.WriteString(t.text)
		}
		b.WriteString(t.post)
	}
	return b.String()
}

// inTemplateArgs reports whether token q is inside a template argument list of its statement.
func (r *rewriter) inTemplateArgs(q int) bool {
	for k := r.prev(q); k >= 0; k = r.prev(k) {
		t := r.t[k]
		if t.kind != tkPunct {
			continue
		}
		switch t.text {
		case ")", "]":
			k = r.matchBack(k)
		case ";", "{", "}":
			return false
		case "<":
			if p := r.prev(k); p >= 0 && r.t[p].kind == tkIdent && !r.is(k+1, tkPunct, "<") && !r.is(k-1, tkPunct, "<") {
				if m := r.match(k); m > q && m < len(r.t)-1 && r.is(m, tkPunct, ">") && !r.anyPunct(k, m, ";", "{", "}") {
					return true
				}
			}
		}
	}
	return false
}

// anyPunct reports whether one of the punctuations given lies strictly between tokens i and j.
func (r *rewriter) anyPunct(i, j int, puncts ...string) bool {
	for k := i + 1; k < j; k++ {
		for _, p := range puncts {
			if r.is(k, tkPunct, p) {
				return true
			}
		}
	}
	return false
}

// exprStatement reports whether the conditional at q begins its statement: nothing but its
// condition lies between the previous ; { } or label and it.
func (r *rewriter) exprStatement(q int) bool {
	for k := r.prev(q); k >= 0; k = r.prev(k) {
		t := r.t[k]
		if t.kind == tkPunct {
			switch t.text {
			case ")", "]":
				k = r.matchBack(k)
				continue
			case ";", "{", "}":
				return true
			case ".", "->", "::", "!", "~", "-", "+", "*", "&", "|", "^", "<", ">", "%", "/":
				continue
			}
			return false
		}
		if t.kind == tkIdent && (t.text == "return" || t.text == "case") {
			return false
		}
	}
	return true
}
