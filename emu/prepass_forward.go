package emu

import (
	"fmt"
	"strings"
)

// vecForwarders makes function templates whose parameters name a vector of a template parameter
// (`thread dtype_frag_t<T>& dst` with `template <typename U> using dtype_frag_t = vec<U, 2>;`, or
// `vec<T, 2>` itself) callable with T deduced, as in MSL, where vec<T, N> is the vector type and
// deducible. The emulator's vec is an alias through a class (half and bfloat vectors are structs),
// which C++ does not deduce through; so after each such template the pre-pass adds a forwarder of
// the same name that deduces the whole vector type and calls the original with its element type:
//
//	template <typename EmuV_T, typename P> void load(thread EmuV_T& dst, P src)
//	{ return load<::metal::emu_detail::velem_t<EmuV_T>, P>(dst, src); }
//
// A forwarder is viable only for vector arguments; given the original's template arguments
// explicitly, it is not viable (its parameter would be the element type).
func (r *rewriter) vecForwarders() {
	aliases := r.vecAliasTemplates()
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "template") || !r.is(r.next(i), tkPunct, "<") || r.sc.kind[i] == scInit {
			continue
		}
		lt := r.next(i)
		gt := r.match(lt)
		if text, end, ok := r.vecForwarder(lt, gt, aliases); ok {
			r.t[end].post += " " + text
			i = end
		}
	}
}

// vecAliasTemplates finds `template <typename U> using NAME = [typename] [metal::]vec<U, K>;`.
func (r *rewriter) vecAliasTemplates() map[string]bool {
	out := map[string]bool{}
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "using") {
			continue
		}
		name := r.next(i)
		eq := r.next(name)
		if name >= len(r.t) || r.t[name].kind != tkIdent || !r.is(eq, tkPunct, "=") {
			continue
		}
		k := r.next(eq)
		if r.is(k, tkIdent, "typename") {
			k = r.next(k)
		}
		if r.is(k, tkPunct, "::") {
			k = r.next(k)
		}
		if r.is(k, tkIdent, "metal") && r.is(r.next(k), tkPunct, "::") {
			k = r.next(r.next(k))
		}
		if !r.is(k, tkIdent, "vec") || !r.is(r.next(k), tkPunct, "<") {
			continue
		}
		// The template head before `using` declares exactly one type parameter, the vector's element.
		tg := r.prev(i)
		if !r.is(tg, tkPunct, ">") {
			continue
		}
		vlt := r.next(k)
		args := splitTop(r.text(vlt+1, r.match(vlt)), ',')
		if len(args) == 2 && r.is(r.next(r.match(vlt)), tkPunct, ";") {
			out[r.t[name].text] = true
		}
	}
	return out
}

type tparam struct {
	kind, name, decl, def string // kind: "type" or "value"; decl: the declaration without default
	pack                  bool
}

// vecForwarder builds the forwarder of the function template whose head is <lt ... gt>; end is
// the token after which it goes (the closing brace of the body, or the ';').
func (r *rewriter) vecForwarder(lt, gt int, aliases map[string]bool) (string, int, bool) {
	var tps []tparam
	for _, part := range splitTop(r.text(lt+1, gt), ',') {
		part = strings.TrimSpace(part)
		p := tparam{}
		if eq := topLevelIndex(part, '='); eq >= 0 {
			p.def = strings.TrimSpace(part[eq+1:])
			part = strings.TrimSpace(part[:eq])
		}
		p.decl = part
		p.pack = strings.Contains(part, "...")
		f := strings.Fields(strings.ReplaceAll(part, "...", " "))
		if len(f) < 2 || strings.ContainsAny(part, "<(") {
			return "", 0, false
		}
		p.name = f[len(f)-1]
		p.kind = "value"
		if f[0] == "typename" || f[0] == "class" {
			p.kind = "type"
		}
		tps = append(tps, p)
	}
	if len(tps) == 0 {
		return "", 0, false
	}
	// The declaration: specifiers and return type, name, '(' params ')', qualifiers, body or ';'.
	k := r.next(gt)
	if r.is(k, tkIdent, "struct") || r.is(k, tkIdent, "class") || r.is(k, tkIdent, "using") || r.is(k, tkIdent, "union") ||
		r.is(k, tkIdent, "template") {
		return "", 0, false
	}
	open := -1
	for j := k; j < len(r.t); j = r.next(j) {
		t := r.t[j]
		if t.kind == tkPunct {
			if t.text == "(" {
				open = j
				break
			}
			if t.text == "<" {
				j = r.match(j)
				continue
			}
			if t.text == ";" || t.text == "{" || t.text == "=" || t.text == "}" {
				return "", 0, false
			}
		}
	}
	name := r.prev(open)
	if open < 0 || name <= gt || r.t[name].kind != tkIdent || r.is(r.prev(name), tkIdent, "operator") {
		return "", 0, false
	}
	cl := r.match(open)
	end := -1
	for j := r.next(cl); j < len(r.t); j = r.next(j) {
		if r.is(j, tkPunct, "{") {
			end = r.match(j)
			break
		}
		if r.is(j, tkPunct, ";") {
			end = j
			break
		}
		if r.is(j, tkPunct, "=") || r.is(j, tkPunct, ":") || r.is(j, tkPunct, "-") || r.is(j, tkPunct, "(") {
			return "", 0, false // = default, a constructor's initializers, a trailing return type
		}
	}
	if end < 0 {
		return "", 0, false
	}
	typeParam := map[string]int{}
	for n, p := range tps {
		if p.kind == "type" && !p.pack {
			typeParam[p.name] = n
		}
	}
	// The parameters; in each, the vectors of a type parameter (ALIAS<P> or vec<P, K>).
	var params []string
	var names []string
	deduced := map[string]bool{}   // P appears in a vector
	elsewhere := map[string]bool{} // P appears otherwise in a parameter (deducible there)
	start := r.next(open)
	depth := 0
	for j := start; j <= cl; j++ {
		t := r.t[j]
		if j < cl && t.kind == tkPunct {
			switch t.text {
			case "(", "[", "{", "<":
				if t.text == "<" && r.templateClose(j) < 0 && r.match(j) >= cl {
					return "", 0, false
				}
				depth++
				continue
			case ")", "]", "}", ">":
				depth--
				continue
			}
		}
		if j < cl && !(depth == 0 && r.is(j, tkPunct, ",")) {
			continue
		}
		if start >= j {
			break
		}
		var b strings.Builder
		last := -1 // the parameter's name
		eq := -1
		for q := start; q < j; q++ {
			if r.is(q, tkPunct, "=") && eq < 0 {
				eq = q
			}
			if r.is(q, tkPunct, "(") {
				return "", 0, false // a function or array reference parameter
			}
		}
		declEnd := j
		if eq >= 0 {
			declEnd = eq
		}
		if pl := r.prev(declEnd); pl >= start && r.t[pl].kind == tkIdent && pl != start {
			pp := r.prev(pl)
			if r.is(pp, tkPunct, "&") || r.is(pp, tkPunct, "*") || r.is(pp, tkPunct, ">") || r.t[pp].kind == tkIdent {
				last = pl
			}
		}
		for q := start; q < j; q++ {
			t := r.t[q]
			if t.kind == tkIdent && (aliases[t.text] || t.text == "vec") && r.is(r.next(q), tkPunct, "<") && !r.is(r.prev(q), tkPunct, ".") {
				vlt := r.next(q)
				vgt := r.match(vlt)
				args := splitTop(r.text(vlt+1, vgt), ',')
				arg := strings.TrimSpace(args[0])
				if _, ok := typeParam[arg]; ok && (aliases[t.text] && len(args) == 1 || t.text == "vec" && len(args) == 2) {
					from := q
					if pv := r.prev(q); r.is(pv, tkPunct, "::") {
						from = pv
						if r.is(r.prev(pv), tkIdent, "metal") {
							from = r.prev(pv)
						}
					}
					s := b.String()
					// drop the qualification (metal::) already written
					s = strings.TrimSuffix(strings.TrimRight(s, " "), r.emitted(from, q))
					b.Reset()
					b.WriteString(s)
					b.WriteString(" EmuV_" + arg)
					deduced[arg] = true
					q = vgt
					continue
				}
			}
			if t.kind == tkIdent {
				if _, ok := typeParam[t.text]; ok {
					elsewhere[t.text] = true
				}
			}
			b.WriteString(r.emitted(q, q+1))
		}
		pname := ""
		if last >= 0 {
			pname = r.t[last].text
		}
		text := b.String()
		if pname == "" {
			pname = fmt.Sprintf("emu_a%d", len(params))
			if eq >= 0 {
				// an unnamed parameter with a default: name it before the '='
				p := strings.Index(text, "=")
				text = text[:p] + " " + pname + " " + text[p:]
			} else {
				text += " " + pname
			}
		}
		if strings.TrimSpace(text) == "void" {
			break
		}
		params = append(params, strings.TrimSpace(text))
		names = append(names, pname)
		start = r.next(j)
	}
	if len(deduced) == 0 {
		return "", 0, false
	}
	for p := range deduced {
		if elsewhere[p] {
			return "", 0, false
		}
	}
	// The return type and specifiers must not name a deduced parameter.
	for j := r.next(gt); j < name; j++ {
		if r.t[j].kind == tkIdent && deduced[r.t[j].text] {
			return "", 0, false
		}
	}
	var head, targs []string
	for _, p := range tps {
		switch {
		case deduced[p.name]:
			head = append(head, "typename EmuV_"+p.name)
			targs = append(targs, "::metal::emu_detail::velem_t<EmuV_"+p.name+">")
		default:
			h := p.decl
			if p.def != "" {
				h += " = " + p.def
			}
			head = append(head, h)
			a := p.name
			if p.pack {
				a += "..."
			}
			targs = append(targs, a)
		}
	}
	var guard []string
	for p := range deduced {
		guard = append(guard, "(::metal::emu_detail::vt<EmuV_"+p+">::n > 1)")
	}
	head = append(head, "typename = ::metal::enable_if_t<"+strings.Join(sortedStrings(guard), " && ")+">")
	spec := r.emitted(r.next(gt), name+1)
	quals := r.emitted(r.next(cl), r.firstOf(r.next(cl), "{", ";"))
	fwd := fmt.Sprintf("template <%s> %s(%s) %s { return %s<%s>(%s); }", strings.Join(head, ", "), spec,
		strings.Join(params, ", "), quals, r.t[name].text, strings.Join(targs, ", "), strings.Join(names, ", "))
	return strings.Join(strings.Fields(fwd), " "), end, true
}

// firstOf returns the first token from i that is one of the punctuations given.
func (r *rewriter) firstOf(i int, puncts ...string) int {
	for k := i; k < len(r.t); k = r.next(k) {
		for _, p := range puncts {
			if r.is(k, tkPunct, p) {
				return k
			}
		}
	}
	return len(r.t) - 1
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
