// VDPBF16PS_Z adds to the float32 lanes of Z(acc) the products of the bfloat16 pairs of Z(w)
// and Z(x), the odd element's first (AVX512_BF16, EVEX.512.F3.0F38.W0 52 /r, which Go's
// assembler does not name; acc, w, x are register numbers).
#define VDPBF16PS_Z(acc, w, x) BYTE $0x62; BYTE $(((1-((acc>>3)&1))<<7) | ((1-((x>>4)&1))<<6) | ((1-((x>>3)&1))<<5) | ((1-((acc>>4)&1))<<4) | 0x02); BYTE $(((15-(w&15))<<3) | 0x06); BYTE $(0x40 | ((1-((w>>4)&1))<<3)); BYTE $0x52; BYTE $(0xC0 | ((acc&7)<<3) | (x&7))
