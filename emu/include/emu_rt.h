// ABI between compiled kernels (the stand-in headers and the generated launchers) and the fiber
// runtime (rt/runtime.cpp). Everything here is plain C so that the Go side can mirror
// emu_dispatch byte for byte. Kernels see it as C++ for OpenCL, the runtime as C++: every address
// space is address space 0 on the CPU, so the two agree on the ABI; strings the kernels pass are
// literals, in the constant address space there.
#pragma once
#ifdef __OPENCL_CPP_VERSION__
#define EMU_STR __constant const char*
#pragma OPENCL EXTENSION __cl_clang_variadic_functions : enable
#else
#include <stddef.h>
#include <stdint.h>
#define EMU_STR const char*
#endif

#define EMU_MAX_BINDINGS 31
#define EMU_MAX_CONSTANTS 128
#define EMU_ERR_LEN 2048

#ifdef __cplusplus
extern "C" {
#endif

// One dispatchThreadgroups call. Layout is mirrored by dispatchDesc in emu//so.go.
struct emu_dispatch {
  uint64_t seed;                          // shuffled schedule seed
  uint64_t buf[EMU_MAX_BINDINGS];         // buffer base pointers (already offset); 0 = unbound
  uint64_t buflen[EMU_MAX_BINDINGS];      // bytes from the pointer to the end of the buffer
  int32_t kernel;                         // index into emu_kernels
  int32_t flags;                          // reserved, 0
  uint32_t groups[3];                     // threadgroups per grid
  uint32_t threads[3];                    // threads per threadgroup
  int32_t schedule;                       // EMU_FORWARD, EMU_REVERSED, EMU_SHUFFLED
  int32_t workers;                        // OS threads running threadgroups
  uint32_t tglen[EMU_MAX_BINDINGS];       // dynamic threadgroup memory lengths ([[threadgroup(n)]]), EMU_TG_SET or'd in when set
  uint32_t fc_val[EMU_MAX_CONSTANTS];     // function constant bits, by slot (the library's own numbering)
  uint8_t fc_set[EMU_MAX_CONSTANTS];      // 1 where the constant is defined
  uint32_t static_tg;                     // out: the kernel's static threadgroup bytes
  uint32_t tg_limit;                      // threadgroup memory limit in bytes
  char err[EMU_ERR_LEN];                  // out: fault description when emu_run returns nonzero
};

enum { EMU_FORWARD = 0, EMU_REVERSED = 1, EMU_SHUFFLED = 2 };

// Position builtins of the running thread (Metal's attribute names abbreviated).
struct emu_lane_info {
  uint32_t tpig[3];   // thread_position_in_grid
  uint32_t tpitg[3];  // thread_position_in_threadgroup
  uint32_t tgpig[3];  // threadgroup_position_in_grid
  uint32_t tptg[3];   // threads_per_threadgroup
  uint32_t tgpg[3];   // threadgroups_per_grid
  uint32_t tpg[3];    // threads_per_grid
  uint32_t tiitg;     // thread_index_in_threadgroup
  uint32_t simd_lane; // thread_index_in_simdgroup
  uint32_t simd_group;  // simdgroup_index_in_threadgroup
  uint32_t simd_width;  // threads_per_simdgroup (32)
  uint32_t simd_groups; // simdgroups_per_threadgroup
};

// A resolver computes a collective for one simdgroup: in[i]/out[i] point at lane i's operand and
// result (null for inactive lanes); active has bit i set for each lane still running.
typedef void (*emu_resolver)(void* const* in, void* const* out, uint32_t active);

// (A typedef: C++ for OpenCL refuses function pointer members spelled out.)
typedef void (*emu_entry_fn)(void);

struct emu_kernel {
  EMU_STR name;            // host name
  emu_entry_fn entry;      // runs one thread of the kernel
  uint32_t max_threads;    // [[max_total_threads_per_threadgroup]] or 1024
  const void* anchor;      // identity of the kernel (instance) that its threadgroup variables name
};

// One kernel-scope threadgroup variable of one kernel instance: static data the compiler emits in
// section emu_tg; the runtime lays the variables of each kernel out (off) when the library is
// first used, without running any kernel.
struct emu_tg_rec {
  const void* anchor;  // the kernel's emu_kernel.anchor
  uint32_t var;        // declaration number within the kernel
  uint32_t size;
  uint32_t align;
  uint32_t off;        // set by the runtime
};

// Defined by the generated launcher code.
extern const struct emu_kernel emu_kernels[];
extern const int emu_nkernels;

// Runtime entry points used by kernels.
const struct emu_lane_info* emu_info(void);
void emu_wait_barrier(uint32_t site, EMU_STR what);
void emu_wait_simd(uint32_t site, EMU_STR what, emu_resolver r, const void* in, void* out);
// Threadgroup-wide collective (tensor ops of threadgroup scope): resolved once every live thread
// of the threadgroup waits at the same site; r gets in/out of every thread (null for threads that
// returned) and the thread count as its third argument.
void emu_wait_group(uint32_t site, EMU_STR what, emu_resolver r, const void* in, void* out);
// Options.Seed of the running dispatch.
uint64_t emu_seed(void);
// A permutation of [0, slots) drawn from the dispatch seed and key, the same for every threadgroup
// and thread of a run; it lives as long as the library.
const uint32_t* emu_layout(uint64_t key, uint32_t slots);
// Address of the running threadgroup's static threadgroup memory.
uintptr_t emu_tg_base(void);
#define EMU_TG_SET 0x80000000u
uintptr_t emu_tg_dynamic(int index);
uintptr_t emu_buffer(int index);
// What an argument whose function constant is false points at: a read-only page of zeros (MSL
// leaves the argument undefined; MLX's GEMM reads its absent addmm parameters into values it never
// uses, reads Apple's optimiser removes): reading gives zeros, writing faults.
uintptr_t emu_absent_arg(void);
uint32_t emu_fc(int slot, int* defined);
void emu_fail(EMU_STR fmt, ...) __attribute__((noreturn));

// Runs one dispatch; returns 0 or nonzero with d->err filled.
int emu_run(struct emu_dispatch* d);
int emu_kernel_count(void);
uint32_t emu_kernel_static_tg(int i);
uint32_t emu_kernel_max_threads(int i);

#ifdef __cplusplus
}
#endif
