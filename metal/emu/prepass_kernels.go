package emu

import (
	"fmt"
	"strconv"
	"strings"
)

// kernels finds kernel definitions, records their parameters, strips the MSL-only syntax
// (kernel keyword, attributes) and rewrites their kernel-scope threadgroup variables.
func (r *rewriter) kernels() ([]*kernelDef, error) {
	var defs []*kernelDef
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		isKernel := tk.kind == tkIdent && tk.text == "kernel" && r.depth[i] == 0
		if tk.kind == tkAttr && r.depth[i] == 0 {
			for _, a := range parseAttrs(tk.text) {
				if a.name == "kernel" {
					isKernel = true
				}
			}
		}
		if !isKernel {
			continue
		}
		s := r.stmtStart(i)
		if r.is(s, tkIdent, "template") && !r.is(r.next(s), tkPunct, "<") {
			continue // explicit instantiation, handled by instantiations
		}
		d := &kernelDef{maxThreads: 1024}
		d.template = r.is(s, tkIdent, "template")
		open := r.findPunct(i, "(")
		if open < 0 {
			return nil, fmt.Errorf("kernel without parameter list")
		}
		nameAt := r.prev(open)
		if r.t[nameAt].kind != tkIdent {
			return nil, fmt.Errorf("cannot find the kernel name before %q", r.text(s, open+1))
		}
		d.name = r.t[nameAt].text
		d.host = d.name
		// Attributes and the kernel keyword between the statement start and the name.
		for k := s; k < nameAt; k++ {
			switch {
			case r.t[k].kind == tkIdent && r.t[k].text == "kernel":
				r.t[k].text = ""
			case r.t[k].kind == tkAttr:
				for _, a := range parseAttrs(r.t[k].text) {
					switch a.name {
					case "host_name":
						d.host = strings.Trim(a.arg, `"`)
					case "max_total_threads_per_threadgroup":
						if n, err := strconv.Atoi(a.arg); err == nil && n > 0 && n <= 1024 {
							d.maxThreads = n
						}
					}
				}
				r.replace(k, k+1, "")
			}
		}
		closeAt := r.match(open)
		var err error
		if d.params, err = r.params(open, closeAt); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", d.name, err)
		}
		body := r.next(closeAt)
		for r.t[body].kind == tkAttr {
			r.replace(body, body+1, "")
			body = r.next(body)
		}
		if r.is(body, tkPunct, ";") {
			continue // declaration only
		}
		if !r.is(body, tkPunct, "{") {
			return nil, fmt.Errorf("kernel %s: expected a body", d.name)
		}
		end := r.match(body)
		if err := r.threadgroupDecls(body, end); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", d.name, err)
		}
		defs = append(defs, d)
		i = end
	}
	return defs, nil
}

// params parses the parameter list between the parentheses at open and closeAt.
func (r *rewriter) params(open, closeAt int) ([]param, error) {
	var out []param
	start := open + 1
	depth := 0
	for k := open + 1; k <= closeAt; k++ {
		tk := r.t[k]
		if tk.kind == tkPunct {
			switch tk.text {
			case "(", "<", "[", "{":
				depth++
			case ")", ">", "]", "}":
				depth--
			}
		}
		if k == closeAt || depth == 0 && tk.kind == tkPunct && tk.text == "," {
			if strings.TrimSpace(r.text(start, k)) != "" {
				p, err := r.param(start, k)
				if err != nil {
					return nil, err
				}
				out = append(out, p)
			}
			start = k + 1
		}
	}
	return out, nil
}

func (r *rewriter) param(i, j int) (param, error) {
	var p param
	var at []attr
	nameAt := -1
	for k := i; k < j; k++ {
		switch r.t[k].kind {
		case tkAttr:
			at = append(at, parseAttrs(r.t[k].text)...)
			r.replace(k, k+1, "")
		case tkIdent:
			nameAt = k
		}
	}
	if nameAt < 0 || len(at) == 0 {
		return p, fmt.Errorf("parameter %q needs a name and an attribute", strings.TrimSpace(r.text(i, j)))
	}
	p.name = r.t[nameAt].text
	p.typ = strings.TrimSpace(r.text(i, nameAt))
	for k := i; k < nameAt; k++ {
		if r.is(k, tkIdent, "tensor") {
			return p, fmt.Errorf("parameter %s: tensor arguments (MTLTensor bindings) are not emulated; bind a buffer and build the tensor in the kernel", p.name)
		}
	}
	a := at[0]
	switch {
	case a.name == "buffer" || a.name == "threadgroup":
		n, err := strconv.Atoi(a.arg)
		if err != nil || n < 0 || n >= maxBindings {
			return p, fmt.Errorf("parameter %s: bad index in [[%s(%s)]]", p.name, a.name, a.arg)
		}
		p.kind, p.index = pBuffer, n
		if a.name == "threadgroup" {
			p.kind = pThreadgroup
		}
	case builtinExpr[a.name] != "":
		p.kind, p.builtin = pBuiltin, a.name
	default:
		return p, fmt.Errorf("parameter %s: unsupported attribute [[%s]]", p.name, a.name)
	}
	return p, nil
}

// threadgroupDecls rewrites `threadgroup T name[dims];` in the kernel body [open, end] into
// references to per-threadgroup storage, and inserts the sizing return after the last one at
// kernel scope (the pipeline measures its static threadgroup memory by running one thread
// that far).
func (r *rewriter) threadgroupDecls(open, end int) error {
	last := -1
	for k := open + 1; k < end; k++ {
		if !r.is(k, tkIdent, "threadgroup") {
			continue
		}
		pv := r.prev(k)
		if !(r.is(pv, tkPunct, ";") || r.is(pv, tkPunct, "{") || r.is(pv, tkPunct, "}") || r.t[pv].kind == tkDirective) {
			continue
		}
		e := r.findPunct(k, ";")
		stmt := r.text(k+1, e)
		head := stmt
		if b := strings.IndexByte(head, '['); b >= 0 {
			head = head[:b]
		}
		if strings.ContainsAny(head, "*&") || strings.Contains(stmt, "=") {
			continue // a pointer or reference into threadgroup memory, not storage
		}
		var repl []string
		for _, decl := range splitTop(stmt, ',') {
			decl = strings.TrimSpace(decl)
			base := decl
			dims := ""
			if b := strings.IndexByte(decl, '['); b >= 0 {
				base, dims = strings.TrimSpace(decl[:b]), decl[b:]
			}
			sp := strings.LastIndexAny(base, " \t\n")
			if sp < 0 {
				if len(repl) == 0 {
					return fmt.Errorf("cannot parse threadgroup declaration %q", decl)
				}
				// `threadgroup T a[4], b[8];`: later names reuse the first type.
				sp = 0
				base = " " + base
			}
			name := strings.TrimSpace(base[sp:])
			typ := strings.TrimSpace(base[:sp])
			if typ == "" {
				typ = strings.TrimSpace(strings.SplitN(strings.TrimSpace(stmt), " ", 2)[0])
			}
			repl = append(repl, fmt.Sprintf("auto& %s = ::emu::tg_static<%s%s>();", name, typ, strings.ReplaceAll(dims, "\n", " ")))
		}
		text := strings.Join(repl, " ")
		if r.depth[k] == r.depth[open]+1 {
			last = k
			text += " if (::emu::sizing()) return;"
		}
		r.replace(k, e+1, text)
		k = e
	}
	if last < 0 {
		r.t[open].text += " if (::emu::sizing()) return;"
	}
	// Only the last sizing return is kept: earlier ones would stop before later declarations.
	seen := false
	for k := end - 1; k > open; k-- {
		if r.t[k].kind == tkSpace && strings.Contains(r.t[k].text, " if (::emu::sizing()) return;") {
			if seen {
				r.t[k].text = strings.Replace(r.t[k].text, " if (::emu::sizing()) return;", "", 1)
			}
			seen = true
		}
	}
	return nil
}

// instantiations reads `template [[host_name("x")]] [[kernel]] decltype(f<A>) f<A>;` (and the
// `void f<A>(...)` form), records the instance and deletes the statement.
func (r *rewriter) instantiations(defs []*kernelDef) ([]kernelInst, error) {
	byName := map[string]*kernelDef{}
	for _, d := range defs {
		byName[d.name] = d
	}
	var out []kernelInst
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "template") || r.depth[i] != 0 || r.is(r.next(i), tkPunct, "<") {
			continue
		}
		e := r.findPunct(i, ";")
		if e < 0 {
			break
		}
		host := ""
		isKernel := false
		nameAt := -1
		for k := i + 1; k < e; k++ {
			switch r.t[k].kind {
			case tkAttr:
				for _, a := range parseAttrs(r.t[k].text) {
					if a.name == "host_name" {
						host = strings.Trim(a.arg, `"`)
					}
					if a.name == "kernel" {
						isKernel = true
					}
				}
			case tkIdent:
				if _, ok := byName[r.t[k].text]; ok && nameAt < 0 && r.is(r.next(k), tkPunct, "<") {
					nameAt = k
				}
				if r.t[k].text == "kernel" {
					isKernel = true
				}
			}
		}
		if nameAt < 0 {
			if isKernel || host != "" {
				return nil, fmt.Errorf("instantiation %q names no template kernel of this file", strings.TrimSpace(r.text(i, e+1)))
			}
			continue
		}
		lt := r.next(nameAt)
		gt := r.match(lt)
		d := byName[r.t[nameAt].text]
		if host == "" {
			host = d.name
		}
		out = append(out, kernelInst{host: host, def: d, targs: strings.TrimSpace(r.text(lt+1, gt))})
		r.replace(i, e+1, "")
		i = e
	}
	return out, nil
}

// vectors rewrites MSL vector constructors (float4(a, b), half4(f4)), static_cast to vectors and
// C casts to vector types, which clang would take as bit-casts, into value conversions.
func (r *rewriter) vectors() {
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if tk.kind == tkIdent && vecTypes[tk.text] && r.is(r.next(i), tkPunct, "(") {
			pv := r.prev(i)
			if r.is(pv, tkPunct, ".") || r.is(pv, tkPunct, ">") && r.is(pv-1, tkPunct, "-") {
				continue // a member named like a vector type
			}
			if r.is(pv, tkPunct, "::") {
				if !r.is(r.prev(pv), tkIdent, "metal") {
					continue
				}
				r.replace(r.prev(pv), pv+1, "")
			}
			r.t[i].text = "::metal::emu_detail::make<::metal::" + tk.text + ">"
			continue
		}
		if tk.kind == tkIdent && tk.text == "static_cast" {
			lt := r.next(i)
			ty := r.next(lt)
			gt := r.next(ty)
			if r.is(lt, tkPunct, "<") && r.t[ty].kind == tkIdent && vecTypes[r.t[ty].text] && r.is(gt, tkPunct, ">") {
				r.replace(i, gt+1, "::metal::emu_detail::make<::metal::"+r.t[ty].text+">")
			}
			continue
		}
		if tk.kind == tkPunct && tk.text == "(" {
			ty := r.next(i)
			if r.is(ty, tkIdent, "metal") && r.is(r.next(ty), tkPunct, "::") {
				ty = r.next(r.next(ty))
			}
			cl := r.next(ty)
			if ty >= len(r.t) || r.t[ty].kind != tkIdent || !vecTypes[r.t[ty].text] || !r.is(cl, tkPunct, ")") {
				continue
			}
			pv := r.prev(i)
			if pv >= 0 && (r.t[pv].kind == tkIdent && r.t[pv].text != "return" || r.is(pv, tkPunct, ")") || r.is(pv, tkPunct, "]")) {
				continue // a call, sizeof(T), or a declaration
			}
			nx := r.next(cl)
			if nx >= len(r.t) {
				continue
			}
			if n := r.t[nx]; n.kind == tkPunct && !strings.Contains("(-+!~*&", n.text) {
				continue
			}
			r.replace(i, cl+1, "::metal::emu_detail::caster<::metal::"+r.t[ty].text+">() ->* ")
		}
	}
}
