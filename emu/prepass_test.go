package emu

import (
	"strings"
	"testing"
)

func TestPrepassRewrites(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // substrings of the generated C++
		not       []string
	}{
		{"vector constructor", "void f() { float4 v = float4(a, b.xy, 1); }",
			[]string{"::metal::emu_detail::make<::metal::float4>(a, b.xy, 1)"}, nil},
		{"qualified constructor", "void f() { auto v = metal::half4(x); }",
			[]string{"::metal::emu_detail::make<::metal::half4>(x)"}, []string{"metal::::"}},
		{"same-size cast", "void f() { uint4 u = (uint4)f4 * 2; }",
			[]string{"::metal::emu_detail::caster<::metal::uint4>() ->* f4 * 2"}, nil},
		{"sizeof is not a cast", "void f() { int n = sizeof(float4); }", []string{"sizeof(float4)"}, []string{"caster"}},
		{"static_cast", "void f() { auto i = static_cast<int2>(f2); }",
			[]string{"::metal::emu_detail::make<::metal::int2>(f2)"}, nil},
		{"kernel and threadgroup array",
			"kernel void k(device float* y [[buffer(3)]], uint2 p [[thread_position_in_grid]]) {\n  threadgroup float t[4][8];\n  threadgroup float* q = t[0];\n  y[0] = q[0];\n}\n",
			[]string{"auto& t = ::emu::tg_var<&k, 0, float[4][8]>::ref();", "k(::emu::buffer(3), ::emu::pos3(i->tpig))", `{"k", emu_entry_0, (uint32_t)(1024), &::emu::kanchor<&k>::a}`},
			[]string{"[[buffer"}},
		{"host_name instantiation",
			"template <typename T> [[max_total_threads_per_threadgroup(256)]] kernel void g(device T* y [[buffer(0)]]) {}\ntemplate [[host_name(\"g_f16\")]] [[kernel]] decltype(g<half>) g<half>;\n",
			[]string{"g<half>(::emu::buffer(0))", "constexpr unsigned emu_mt_0() { return (256); }", `{"g_f16", emu_entry_0, (uint32_t)emu_mt_0<half>(), &::emu::kanchor<&g<half>>::a}`}, []string{"decltype(g<half>)"}},
		{"function constants",
			"constant uint n [[function_constant(3)]];\nconstant bool has_n = is_function_constant_defined(n);\nconstant uint twice = n * 2;\nvoid f(uint* y) { y[0] = has_n ? twice : n; }\n",
			[]string{"emu_fc_n() { return ::emu::fc<uint>(0); }", "emu_fc_has_n() { return ::emu::fc_defined(0); }",
				"emu_fc_twice() { return emu_fc_n() * 2; }", "y[0] = emu_fc_has_n() ? ::metal::emu_detail::cond_op(emu_fc_twice()) : ::metal::emu_detail::cond_op(emu_fc_n());"}, nil},
	}
	for _, c := range cases {
		p, err := prepass(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(p.cpp, w) {
				t.Errorf("%s: output lacks %q:\n%s", c.name, w, p.cpp)
			}
		}
		for _, w := range c.not {
			if strings.Contains(p.cpp, w) {
				t.Errorf("%s: output keeps %q:\n%s", c.name, w, p.cpp)
			}
		}
	}
}

func TestPrepassErrors(t *testing.T) {
	for _, src := range []string{
		"kernel void k(uint y) {}",                                                                         // no attribute
		"kernel void k(device float* y [[buffer(31)]]) {}",                                                 // index out of range
		"kernel void k(device float* y [[stage_in]]) {}",                                                   // unsupported attribute
		"kernel void k(device float* y [[buffer(0)]]) {}\nkernel void k(device float* z [[buffer(0)]]) {}", // duplicate name
	} {
		p, err := prepass(src)
		if err == nil && !hasErrors(p.diags) {
			t.Errorf("accepted %q", src)
		}
	}
}
