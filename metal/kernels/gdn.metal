// gdn.metal: Gated DeltaNet over a prefill chunk (Yang, Kautz, Hatamizadeh 2024, as in
// transformers' Qwen3NextGatedDeltaNet; docs/MODELS.md "Gated DeltaNet layer").
//   gdn_pre          short conv + silu, l2norm of q and k (q scaled by dk^-0.5), gates beta and g
//   gdn_conv_update  the conv state <- the last ConvK-1 inputs (after gdn_pre has read it)
//   gdn_norm_qk      the l2norm of gdn_pre alone, for a scan of raw q and k (op.GDNScan.NormQK)
//   gdn_scan         the delta-rule recurrence token by token, state [Hv, dk, dv] float32
//   gdn_scan_chunk   the same in chunks of 64 tokens (WY form; a variant of op gdn_scan)
//   gdn_post         gated RMSNorm per value head (sigmoid or silu gate: function constant 0)
// All kernels assume 32-lane simdgroups (the host checks threadExecutionWidth).
#include <metal_stdlib>
using namespace metal;

static inline float tg_sum(float v, threadgroup float* part, uint tid, uint ntg) {
    float s = simd_sum(v);
    if (tid % 32 == 0) {
        part[tid / 32] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float tot = 0.0f;
    uint nsg = (ntg + 31) / 32;
    for (uint i = 0; i < nsg; ++i) {
        tot += part[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return tot;
}

static inline float sigmoid1(float x) {
    return 1.0f / (1.0f + exp(-x));
}

// The silu(conv) of channel c at token t; rows before the chunk come from the conv state.
static inline float gdn_conv(const device float* qkv, const device float* cstate, const device float* cw,
                             uint t, uint c, uint C, uint K) {
    float acc = 0.0f;
    for (uint j = 0; j < K; ++j) {
        int r = int(t) - int(K - 1) + int(j);
        float x = r < 0 ? cstate[uint(r + int(K) - 1) * C + c] : qkv[uint(r) * C + c];
        acc = fma(cw[c * K + j], x, acc);
    }
    return acc * sigmoid1(acc);
}

// gdn_pre: grid (2*Hk + Hv + 1, T). Unit u < Hk: q head u; u < 2*Hk: k head u - Hk (both conv,
// silu, l2norm; q times dk^-0.5); u < 2*Hk + Hv: v head (conv, silu); the last unit: the gates of
// token t (beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)). Threadgroup memory: 128 B.
kernel void gdn_pre(device float* q [[buffer(0)]],
                    device float* k [[buffer(1)]],
                    device float* v [[buffer(2)]],
                    device float* g [[buffer(3)]],
                    device float* beta [[buffer(4)]],
                    const device float* qkv [[buffer(5)]],
                    const device float* a [[buffer(6)]],
                    const device float* b [[buffer(7)]],
                    const device float* cstate [[buffer(8)]],
                    const device float* cw [[buffer(9)]],
                    const device float* alog [[buffer(10)]],
                    const device float* dtb [[buffer(11)]],
                    constant GDNPreParams& p [[buffer(12)]],
                    uint2 tg [[threadgroup_position_in_grid]],
                    uint tid [[thread_index_in_threadgroup]],
                    uint2 ntg2 [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    uint ntg = ntg2.x;
    uint u = tg.x;
    uint t = tg.y;
    uint qkC = p.Hk * p.Dk;
    uint C = 2 * qkC + p.Hv * p.Dv;
    if (u < 2 * p.Hk) {
        bool isq = u < p.Hk;
        uint c0 = u * p.Dk;
        device float* dst = (isq ? q : k) + (t * p.Hk + (isq ? u : u - p.Hk)) * p.Dk;
        float ss = 0.0f;
        for (uint i = tid; i < p.Dk; i += ntg) {
            float y = gdn_conv(qkv, cstate, cw, t, c0 + i, C, p.K);
            dst[i] = y;
            ss = fma(y, y, ss);
        }
        ss = tg_sum(ss, part, tid, ntg);
        float f = rsqrt(ss + 1e-6f);
        if (isq) {
            f *= rsqrt(float(p.Dk));
        }
        for (uint i = tid; i < p.Dk; i += ntg) {
            dst[i] = dst[i] * f;
        }
    } else if (u < 2 * p.Hk + p.Hv) {
        uint h = u - 2 * p.Hk;
        uint c0 = 2 * qkC + h * p.Dv;
        device float* dst = v + (t * p.Hv + h) * p.Dv;
        for (uint i = tid; i < p.Dv; i += ntg) {
            dst[i] = gdn_conv(qkv, cstate, cw, t, c0 + i, C, p.K);
        }
    } else {
        for (uint h = tid; h < p.Hv; h += ntg) {
            uint i = t * p.Hv + h;
            beta[i] = sigmoid1(b[i]);
            float x = a[i] + dtb[h];
            float sp = x > 20.0f ? x : (x < -15.0f ? exp(x) : log(1.0f + exp(x)));
            g[i] = -exp(alog[h]) * sp;
        }
    }
}

// gdn_conv_update: state rows i < K-1 <- row T+i of [state; qkv]. One thread per channel reads
// all its rows before writing any (the old rows it overwrites may be the ones it reads). K <= 9.
// Grid ceil(C / ntg). No threadgroup memory.
kernel void gdn_conv_update(device float* cstate [[buffer(0)]],
                            const device float* qkv [[buffer(1)]],
                            constant GDNConvParams& p [[buffer(2)]],
                            uint c [[thread_position_in_grid]]) {
    if (c >= p.C) {
        return;
    }
    float rows[8];
    uint keep = p.K - 1;
    for (uint i = 0; i < keep; ++i) {
        uint hi = p.T + i;
        rows[i] = hi < keep ? cstate[hi * p.C + c] : qkv[(hi - keep) * p.C + c];
    }
    for (uint i = 0; i < keep; ++i) {
        cstate[i * p.C + c] = rows[i];
    }
}

// gdn_norm_qk: grid (2*Hk, T). Unit u < Hk writes q head u of token t, l2-normalised and times
// dk^-0.5, into qn; unit u >= Hk k head u - Hk, l2-normalised, into kn (as gdn_pre normalises
// them: x * rsqrt(sum x^2 + 1e-6)). Threadgroup memory: 128 B.
kernel void gdn_norm_qk(device float* qn [[buffer(0)]],
                        device float* kn [[buffer(1)]],
                        const device float* q [[buffer(2)]],
                        const device float* k [[buffer(3)]],
                        constant GDNScanParams& p [[buffer(4)]],
                        uint2 tg [[threadgroup_position_in_grid]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint2 ntg2 [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    uint ntg = ntg2.x;
    bool isq = tg.x < p.Hk;
    uint off = (tg.y * p.Hk + (isq ? tg.x : tg.x - p.Hk)) * p.Dk;
    const device float* src = (isq ? q : k) + off;
    device float* dst = (isq ? qn : kn) + off;
    float ss = 0.0f;
    for (uint i = tid; i < p.Dk; i += ntg) {
        float x = src[i];
        ss = fma(x, x, ss);
    }
    ss = tg_sum(ss, part, tid, ntg);
    float f = rsqrt(ss + 1e-6f);
    if (isq) {
        f *= rsqrt(float(p.Dk));
    }
    for (uint i = tid; i < p.Dk; i += ntg) {
        dst[i] = src[i] * f;
    }
}

// gdn_scan: the recurrence S = exp(g) S; delta = beta (v - S^T k); S += k delta^T; o = S^T q.
// Grid (ceil(Dv / 32), Hv), 128 threads: threadgroup (x, y) owns the 32 state columns
// x*32.. of one value head (4 threadgroups per head at dv = 128); threadgroups y of the value
// heads that read the same qk head are adjacent (they share k and q in cache). Lane l holds
// column x*32 + l; simdgroup s holds the rows s*R .. s*R+R-1, R = ceil(Dk / 4) <= 32, in registers.
// The column dots S^T k and S^T q are summed per simdgroup in row order, then over the four
// simdgroups in order. Threadgroup memory: 1 KiB (two [4][32] partial tables, alternating so one
// barrier per reduction suffices); occupancy is bound by the 32 state registers, not memory.
kernel void gdn_scan(device float* o [[buffer(0)]],
                     device float* state [[buffer(1)]],
                     const device float* q [[buffer(2)]],
                     const device float* k [[buffer(3)]],
                     const device float* v [[buffer(4)]],
                     const device float* g [[buffer(5)]],
                     const device float* beta [[buffer(6)]],
                     constant GDNScanParams& p [[buffer(7)]],
                     uint2 tg [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float red_kv[128];
    threadgroup float red_o[128];
    uint lane = tid % 32;
    uint sg = tid / 32;
    uint r = p.Hv / p.Hk;
    uint grp = tg.y / r;
    uint m = tg.y % r;
    uint h = p.tiled != 0 ? m * p.Hk + grp : grp * r + m;
    uint j = grp;
    uint col = tg.x * 32 + lane;
    bool colok = col < p.Dv;
    uint R = (p.Dk + 3) / 4;
    uint i0 = sg * R;
    device float* S = state + h * p.Dk * p.Dv;
    float s[32];
    for (uint rr = 0; rr < 32; ++rr) {
        uint i = i0 + rr;
        s[rr] = (rr < R && i < p.Dk && colok) ? S[i * p.Dv + col] : 0.0f;
    }
    for (uint t = 0; t < p.T; ++t) {
        const device float* kt = k + (t * p.Hk + j) * p.Dk;
        const device float* qt = q + (t * p.Hk + j) * p.Dk;
        float decay = exp(g[t * p.Hv + h]);
        if (decay < 1e-30f) {
            decay = 0.0f;
        }
        float bt = beta[t * p.Hv + h];
        float kv = 0.0f;
        for (uint rr = 0; rr < 32; ++rr) {
            uint i = i0 + rr;
            if (rr < R && i < p.Dk) {
                s[rr] *= decay;
                kv = fma(s[rr], kt[i], kv);
            }
        }
        red_kv[tid] = kv;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        kv = ((red_kv[lane] + red_kv[32 + lane]) + red_kv[64 + lane]) + red_kv[96 + lane];
        float delta = colok ? bt * (v[(t * p.Hv + h) * p.Dv + col] - kv) : 0.0f;
        float ov = 0.0f;
        for (uint rr = 0; rr < 32; ++rr) {
            uint i = i0 + rr;
            if (rr < R && i < p.Dk) {
                s[rr] = fma(kt[i], delta, s[rr]);
                ov = fma(s[rr], qt[i], ov);
            }
        }
        red_o[tid] = ov;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (sg == 0 && colok) {
            o[(t * p.Hv + h) * p.Dv + col] = ((red_o[lane] + red_o[32 + lane]) + red_o[64 + lane]) + red_o[96 + lane];
        }
    }
    for (uint rr = 0; rr < 32; ++rr) {
        uint i = i0 + rr;
        if (rr < R && i < p.Dk && colok) {
            S[i * p.Dv + col] = s[rr];
        }
    }
}

constant bool gdn_act_silu [[function_constant(0)]];

// gdn_post: y = w * (o * rsqrt(mean(o^2) + eps)) * act(z) per row of Dv (one row = one token's
// value head), act = silu (function constant 0 true, Qwen3-Next) or sigmoid (Qwen3.8-Flash-Next).
// One threadgroup per row. Threadgroup memory: 128 B.
kernel void gdn_post(device float* y [[buffer(0)]],
                     const device float* o [[buffer(1)]],
                     const device float* z [[buffer(2)]],
                     const device float* w [[buffer(3)]],
                     constant GDNPostParams& p [[buffer(4)]],
                     uint row [[threadgroup_position_in_grid]],
                     uint tid [[thread_index_in_threadgroup]],
                     uint ntg [[threads_per_threadgroup]]) {
    threadgroup float part[32];
    const device float* orow = o + row * p.Dv;
    const device float* zrow = z + row * p.Dv;
    float ss = 0.0f;
    for (uint d = tid; d < p.Dv; d += ntg) {
        ss = fma(orow[d], orow[d], ss);
    }
    ss = tg_sum(ss, part, tid, ntg);
    float rs = rsqrt(ss / float(p.Dv) + p.eps);
    for (uint d = tid; d < p.Dv; d += ntg) {
        float zd = zrow[d];
        float gate = sigmoid1(zd);
        if (gdn_act_silu) {
            gate *= zd;
        }
        y[row * p.Dv + d] = w[d] * (orow[d] * rs) * gate;
    }
}

// gdn_scan_chunk: the chunked (WY) form of gdn_scan, C = 64 tokens per chunk (docs/MODELS.md "Chunked
// form"; the CPU GDNScan's Chunked mode, with W S folded into the right-hand side of the solve). Per chunk,
// with s_ij = g_{j+1} + ... + g_i summed from i down (Gamma_ij = exp(s_ij)), G_i = g_0 + ... + g_i:
//   L  = -diag(beta) strict_lower(K K^T .* Gamma)     P = lower_incl(Q K^T .* Gamma)
//   Vn = forward substitution of (I - L) Vn = diag(beta) (V - diag(exp(G)) K S)
//   O  = diag(exp(G)) Q S + P Vn;   S' = exp(G_last) S + (K .* exp(G_last - G))^T Vn
// Grid (ceil(Dv / 32), Hv), 128 threads, as gdn_scan: threadgroup (x, y) owns the state columns
// x*32.. of one value head; lane l holds column x*32 + l, simdgroup s the rows s*R.., R = ceil(Dk/4)
// <= 32, in registers for the whole call. Decay factors below 1e-30 flush to zero.
// Threadgroup memory (static), 29,952 B: tri [64][64] 16 KiB (Q K^T .* Gamma transposed in the upper
// triangle incl. the diagonal, L in the strict lower one), vn [2176] 8.5 KiB (first the Q and K
// slices [64][17] of the K K^T / Q K^T products, 16 dims at a time, then Vn [64][32]), red [4][8][32]
// 4 KiB (per-simdgroup partials of K S and Q S, 8 tokens at a time), eg, gl, bt [64] 768 B: one
// threadgroup per core at 32 KiB per core (four simdgroups resident).
// Fixed orders: every dot over Dk runs d = 0, 1, ... (one owner thread per product element), the
// per-simdgroup partials add as ((s0 + s1) + s2) + s3, the solve and P Vn run j = 0, 1, ..., the
// state update i = 0, 1, ...; the solve is done by simdgroup 0 (lane = column, no sharing).
kernel void gdn_scan_chunk(device float* o [[buffer(0)]],
                           device float* state [[buffer(1)]],
                           const device float* q [[buffer(2)]],
                           const device float* k [[buffer(3)]],
                           const device float* v [[buffer(4)]],
                           const device float* g [[buffer(5)]],
                           const device float* beta [[buffer(6)]],
                           constant GDNScanParams& p [[buffer(7)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float tri[64 * 64];
    threadgroup float vn[2 * 64 * 17];
    threadgroup float red[4 * 8 * 32];
    threadgroup float eg[64];
    threadgroup float gl[64];
    threadgroup float bt[64];
    const uint CH = 64;
    const uint DS = 16; // dims per staged slice
    const uint LD = 17; // row stride of a staged slice
    uint lane = tid % 32;
    uint sg = tid / 32;
    uint r = p.Hv / p.Hk;
    uint grp = tg.y / r;
    uint m = tg.y % r;
    uint h = p.tiled != 0 ? m * p.Hk + grp : grp * r + m;
    uint j = grp;
    uint col = tg.x * 32 + lane;
    bool colok = col < p.Dv;
    uint R = (p.Dk + 3) / 4;
    uint i0 = sg * R;
    device float* S = state + h * p.Dk * p.Dv;
    float s[32];
    for (uint rr = 0; rr < 32; ++rr) {
        uint i = i0 + rr;
        s[rr] = (rr < R && i < p.Dk && colok) ? S[i * p.Dv + col] : 0.0f;
    }
    threadgroup float* qst = vn;
    threadgroup float* kst = vn + 64 * LD;
    for (uint t0 = 0; t0 < p.T; t0 += CH) {
        uint c = min(CH, p.T - t0);

        // 1. tri <- [Q K^T upper-transposed | K K^T strict lower], dims staged 16 at a time.
        for (uint u = 0; u < 32; ++u) {
            tri[tid + 128 * u] = 0.0f;
        }
        for (uint d0 = 0; d0 < p.Dk; d0 += DS) {
            for (uint u = 0; u < 8; ++u) {
                uint e = tid + 128 * u; // 0..1023: row e / 16 of the chunk, dim e % 16 of the slice
                uint row = e / DS;
                uint d = d0 + e % DS;
                bool ok = row < c && d < p.Dk;
                uint src = ((t0 + row) * p.Hk + j) * p.Dk + d;
                qst[row * LD + e % DS] = ok ? q[src] : 0.0f;
                kst[row * LD + e % DS] = ok ? k[src] : 0.0f;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (uint u = 0; u < 32; ++u) {
                uint e = tid + 128 * u;
                uint a = e / 64;
                uint b = e % 64;
                if (a < c && b < c) {
                    // b < a: (K K^T)_ab; b >= a: (Q K^T)_ba
                    threadgroup const float* x = b < a ? kst + a * LD : qst + b * LD;
                    threadgroup const float* y = b < a ? kst + b * LD : kst + a * LD;
                    float acc = tri[e];
                    for (uint dd = 0; dd < DS; ++dd) {
                        acc = fma(x[dd], y[dd], acc);
                    }
                    tri[e] = acc;
                }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }

        // 2. Decays: thread i < 64 scales L row i, thread 64 + i the P row i (same s sequence);
        // thread i also forms exp(G_i), beta_i, and thread c-1 the exp(G_last - G_j).
        {
            uint i = tid % 64;
            bool lowerRow = tid < 64;
            if (i < c) {
                float bi = beta[(t0 + i) * p.Hv + h];
                float sacc = 0.0f;
                for (uint jj = i; jj > 0; --jj) {
                    sacc += g[(t0 + jj) * p.Hv + h]; // s_{i, jj-1}
                    float gam = exp(sacc);
                    if (gam < 1e-30f) {
                        gam = 0.0f;
                    }
                    uint jc = jj - 1;
                    if (lowerRow) {
                        tri[i * 64 + jc] = (-bi * tri[i * 64 + jc]) * gam;
                        if (i == c - 1) {
                            gl[jc] = gam;
                        }
                    } else {
                        tri[jc * 64 + i] = tri[jc * 64 + i] * gam;
                    }
                }
                if (lowerRow) {
                    float G = 0.0f;
                    for (uint tt = 0; tt <= i; ++tt) {
                        G += g[(t0 + tt) * p.Hv + h];
                    }
                    float e = exp(G);
                    eg[i] = e < 1e-30f ? 0.0f : e;
                    bt[i] = bi;
                    if (i == c - 1) {
                        gl[i] = 1.0f;
                    }
                }
            }
        }

        // 3. K S -> right-hand side vn_i = beta_i (v_i - exp(G_i) (K S)_i); Q S -> qs (kept by the
        // thread that writes output row i: tokens 8b + sg and 8b + sg + 4 of batch b).
        float qs[16];
        for (uint pass = 0; pass < 2; ++pass) {
            const device float* src = pass == 0 ? k : q;
            for (uint b = 0; b < 8; ++b) {
                uint ib = 8 * b;
                if (ib >= c) {
                    break;
                }
                for (uint u = 0; u < 8; ++u) {
                    uint i = ib + u;
                    float acc = 0.0f;
                    if (i < c) {
                        const device float* xt = src + ((t0 + i) * p.Hk + j) * p.Dk;
                        for (uint rr = 0; rr < 32; ++rr) {
                            uint ii = i0 + rr;
                            if (rr < R && ii < p.Dk) {
                                acc = fma(s[rr], xt[ii], acc);
                            }
                        }
                    }
                    red[(sg * 8 + u) * 32 + lane] = acc;
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                for (uint w = 0; w < 2; ++w) {
                    uint u = sg + 4 * w;
                    uint i = ib + u;
                    float x = ((red[u * 32 + lane] + red[(8 + u) * 32 + lane]) + red[(16 + u) * 32 + lane]) +
                              red[(24 + u) * 32 + lane];
                    if (pass == 0) {
                        if (i < c) {
                            float vi = colok ? v[((t0 + i) * p.Hv + h) * p.Dv + col] : 0.0f;
                            vn[i * 32 + lane] = colok ? bt[i] * (vi - eg[i] * x) : 0.0f;
                        }
                    } else {
                        qs[2 * b + w] = x;
                    }
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
            }
        }

        // 4. Forward substitution vn_i += sum_{j < i} L_ij vn_j, one column per lane of simdgroup 0.
        if (sg == 0) {
            for (uint i = 1; i < c; ++i) {
                float x = vn[i * 32 + lane];
                for (uint jj = 0; jj < i; ++jj) {
                    x = fma(tri[i * 64 + jj], vn[jj * 32 + lane], x);
                }
                vn[i * 32 + lane] = x;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        // 5. Output rows i = 8b + sg + 4w: exp(G_i) (Q S)_i + sum_{j <= i} P_ij vn_j.
        for (uint b = 0; b < 8; ++b) {
            for (uint w = 0; w < 2; ++w) {
                uint i = 8 * b + sg + 4 * w;
                if (i < c && colok) {
                    float x = eg[i] * qs[2 * b + w];
                    for (uint jj = 0; jj <= i; ++jj) {
                        x = fma(tri[jj * 64 + i], vn[jj * 32 + lane], x);
                    }
                    o[((t0 + i) * p.Hv + h) * p.Dv + col] = x;
                }
            }
        }

        // 6. State: S = exp(G_last) S + sum_i (k_i exp(G_last - G_i)) vn_i^T over this thread's rows.
        float el = eg[c - 1];
        for (uint rr = 0; rr < 32; ++rr) {
            s[rr] = el == 0.0f ? 0.0f : s[rr] * el;
        }
        for (uint i = 0; i < c; ++i) {
            const device float* kt = k + ((t0 + i) * p.Hk + j) * p.Dk;
            float f = gl[i];
            float x = vn[i * 32 + lane];
            for (uint rr = 0; rr < 32; ++rr) {
                uint ii = i0 + rr;
                if (rr < R && ii < p.Dk) {
                    s[rr] = fma(kt[ii] * f, x, s[rr]);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint rr = 0; rr < 32; ++rr) {
        uint i = i0 + rr;
        if (rr < R && i < p.Dk && colok) {
            S[i * p.Dv + col] = s[rr];
        }
    }
}
