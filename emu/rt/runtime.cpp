// Fiber runtime of the MSL emulator: runs the threads of a threadgroup as fibers on one OS thread,
// resolves threadgroup barriers and simdgroup collectives, detects divergence and deadlock, and
// spreads threadgroups over worker threads.
#include "emu_rt.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" void emu_switch(void** save_sp, void* new_sp);
extern "C" void emu_fiber_start(void);

namespace {

enum State { RUNNABLE, WAIT_BARRIER, WAIT_SIMD, WAIT_GROUP, DONE };

#ifdef EMU_ASAN
const size_t kStack = 512 << 10;
#else
const size_t kStack = 256 << 10;
#endif
const size_t kGuard = 16 << 10;
const int kSimd = 32;

struct Group;

struct Lane {
  emu_lane_info info;
  void* sp;
  char* stack;  // lowest usable byte
  State state;
  uint32_t site;
  const char* what;
  emu_resolver resolve;
  const void* in;
  void* out;
  Group* g;
#ifdef EMU_ASAN
  void* fake;
#endif
};

struct Group {
  emu_dispatch* d;
  const emu_kernel* k;
  std::vector<Lane> lanes;
  std::vector<int> order;
  char* stacks;
  size_t stacks_len;
  int n;
  int live;
  char* tg;          // threadgroup memory of the current threadgroup
  size_t tg_dyn_off[EMU_MAX_BINDINGS];
  void* sched_sp;
  bool failed;
  char err[EMU_ERR_LEN];
  uint64_t rng;
  uint32_t gid[3];
#ifdef EMU_ASAN
  const void* sched_bottom;
  size_t sched_size;
  void* sched_fake;
#endif
};

thread_local Lane* cur;
thread_local Group* cur_group;


const char* schedule_name(int s) {
  return s == EMU_REVERSED ? "reversed" : s == EMU_SHUFFLED ? "shuffled" : "forward";
}

// Switches from lane L back to the scheduler of its group.
void yield_to_scheduler(Lane* L, bool final) {
  Group* g = L->g;
#ifdef EMU_ASAN
  __sanitizer_start_switch_fiber(final ? nullptr : &L->fake, g->sched_bottom, g->sched_size);
#else
  (void)final;
#endif
  emu_switch(&L->sp, g->sched_sp);
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(L->fake, &g->sched_bottom, &g->sched_size);
#endif
}

void fail_group(Group* g, const char* msg) {
  if (!g->failed) {
    g->failed = true;
    snprintf(g->err, sizeof g->err, "%s", msg);
  }
}

__attribute__((noreturn)) void fail_lane(Lane* L, const char* msg) {
  Group* g = L->g;
  char buf[EMU_ERR_LEN];
  snprintf(buf, sizeof buf, "kernel %s, threadgroup (%u,%u,%u), thread %u (simdgroup %u lane %u): %s",
           g->k->name, g->gid[0], g->gid[1], g->gid[2], L->info.tiitg, L->info.simd_group,
           L->info.simd_lane, msg);
  fail_group(g, buf);
  yield_to_scheduler(L, true);
  abort();  // never resumed
}

void describe_site(char* out, size_t n, const Lane& L) {
  if (L.state == DONE) snprintf(out, n, "returned");
  else if (L.state == RUNNABLE) snprintf(out, n, "running");
  else snprintf(out, n, "%s at line %u col %u", L.what, L.site >> 12, L.site & 0xfff);
}

// Appends "lanes a-b <where>" runs for simdgroup s (or the whole group when s < 0).
void describe_lanes(Group* g, int lo, int hi, char* out, size_t n) {
  size_t len = strlen(out);
  int i = lo;
  while (i < hi && len + 80 < n) {
    char w[128];
    describe_site(w, sizeof w, g->lanes[i]);
    int j = i + 1;
    for (; j < hi; j++) {
      char w2[128];
      describe_site(w2, sizeof w2, g->lanes[j]);
      if (strcmp(w, w2) != 0) break;
    }
    len += snprintf(out + len, n - len, "%sthreads %d-%d %s", i == lo ? "" : "; ", i, j - 1, w);
    i = j;
  }
}

// Completes the collective of simdgroup s if every live lane of it waits at one.
void try_resolve_simd(Group* g, int s) {
  int lo = s * kSimd, hi = lo + kSimd < g->n ? lo + kSimd : g->n;
  const Lane* first = nullptr;
  for (int i = lo; i < hi; i++) {
    const Lane& L = g->lanes[i];
    if (L.state == DONE) continue;
    if (L.state != WAIT_SIMD) return;
    if (!first) first = &L;
  }
  if (!first) return;
  void* in[kSimd] = {};
  void* out[kSimd] = {};
  uint32_t active = 0;
  for (int i = lo; i < hi; i++) {
    Lane& L = g->lanes[i];
    if (L.state == DONE) continue;
    if (L.site != first->site || L.resolve != first->resolve) {
      char msg[EMU_ERR_LEN];
      snprintf(msg, sizeof msg, "divergent simdgroup collective in simdgroup %d: ", s);
      describe_lanes(g, lo, hi, msg, sizeof msg);
      fail_lane(cur, msg);
    }
    in[i - lo] = (void*)L.in;
    out[i - lo] = L.out;
    active |= 1u << (i - lo);
  }
  first->resolve(in, out, active);
  for (int i = lo; i < hi; i++)
    if (g->lanes[i].state == WAIT_SIMD) g->lanes[i].state = RUNNABLE;
}

// Releases a threadgroup barrier once every live thread waits at it.
void try_resolve_barrier(Group* g) {
  const Lane* first = nullptr;
  for (int i = 0; i < g->n; i++) {
    const Lane& L = g->lanes[i];
    if (L.state == DONE) continue;
    if (L.state != WAIT_BARRIER) return;
    if (!first) first = &L;
    else if (L.site != first->site) {
      char msg[EMU_ERR_LEN];
      snprintf(msg, sizeof msg, "threads wait at different threadgroup barriers: ");
      describe_lanes(g, 0, g->n, msg, sizeof msg);
      fail_lane(cur, msg);
    }
  }
  if (!first) return;
  for (int i = 0; i < g->n; i++)
    if (g->lanes[i].state == WAIT_BARRIER) g->lanes[i].state = RUNNABLE;
}

// Runs a threadgroup-wide collective once every live thread waits at the same one.
void try_resolve_group(Group* g) {
  const Lane* first = nullptr;
  for (int i = 0; i < g->n; i++) {
    const Lane& L = g->lanes[i];
    if (L.state == DONE) continue;
    if (L.state != WAIT_GROUP) return;
    if (!first) first = &L;
    else if (L.site != first->site || L.resolve != first->resolve) {
      char msg[EMU_ERR_LEN];
      snprintf(msg, sizeof msg, "threads wait at different threadgroup-scope operations: ");
      describe_lanes(g, 0, g->n, msg, sizeof msg);
      fail_lane(cur, msg);
    }
  }
  if (!first) return;
  std::vector<void*> in(g->n), out(g->n);
  for (int i = 0; i < g->n; i++) {
    Lane& L = g->lanes[i];
    if (L.state == DONE) continue;
    in[i] = (void*)L.in;
    out[i] = L.out;
  }
  first->resolve(in.data(), out.data(), (uint32_t)g->n);
  for (int i = 0; i < g->n; i++)
    if (g->lanes[i].state == WAIT_GROUP) g->lanes[i].state = RUNNABLE;
}

void fiber_main(void* arg) {
  Lane* L = (Lane*)arg;
  Group* g = L->g;
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g->sched_bottom, &g->sched_size);
#endif
  g->k->entry();
  L->state = DONE;
  g->live--;
  try_resolve_simd(g, L->info.simd_group);
  try_resolve_barrier(g);
  try_resolve_group(g);
  yield_to_scheduler(L, true);
  abort();
}

void* fiber_init(char* stack, size_t size, void (*fn)(void*), void* arg) {
  uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
#if defined(__x86_64__)
  uint64_t* sp = (uint64_t*)(top - 64);
  uint32_t mx;
  uint16_t cw;
  __asm__ volatile("stmxcsr %0" : "=m"(mx));
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  memset(sp, 0, 64);
  memcpy((char*)sp, &mx, 4);
  memcpy((char*)sp + 4, &cw, 2);
  sp[3] = (uint64_t)fn;           // r13
  sp[4] = (uint64_t)arg;          // r12
  sp[7] = (uint64_t)&emu_fiber_start;
  return sp;
#elif defined(__aarch64__)
  uint64_t* sp = (uint64_t*)(top - 176);
  memset(sp, 0, 176);
  uint64_t fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  sp[0] = (uint64_t)arg;          // x19
  sp[1] = (uint64_t)fn;           // x20
  sp[11] = (uint64_t)&emu_fiber_start;  // x30
  sp[20] = fpcr;
  return sp;
#endif
}

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void schedule_order(Group* g) {
  int n = g->n;
  for (int i = 0; i < n; i++)
    g->order[i] = g->d->schedule == EMU_REVERSED ? n - 1 - i : i;
  if (g->d->schedule == EMU_SHUFFLED)
    for (int i = n - 1; i > 0; i--) {
      int j = (int)(splitmix(&g->rng) % (uint64_t)(i + 1));
      int t = g->order[i]; g->order[i] = g->order[j]; g->order[j] = t;
    }
}

// Runs threadgroup number idx (linear) to completion on the calling OS thread.
void run_group(Group* g, uint64_t idx, size_t tg_total) {
  emu_dispatch* d = g->d;
  g->gid[0] = (uint32_t)(idx % d->groups[0]);
  g->gid[1] = (uint32_t)(idx / d->groups[0] % d->groups[1]);
  g->gid[2] = (uint32_t)(idx / ((uint64_t)d->groups[0] * d->groups[1]));
  g->rng = d->seed ^ (idx * 0x2545f4914f6cdd1dull);
  g->failed = false;
  g->tg = (char*)malloc(tg_total ? tg_total : 1);
  // Poison threadgroup memory: reads before writes see NaN / all-ones.
  memset(g->tg, 0xff, tg_total);
  g->live = g->n;
#ifdef EMU_ASAN
  __asan_unpoison_memory_region(g->stacks, g->stacks_len);
#endif
  for (int i = 0; i < g->n; i++) {
    Lane& L = g->lanes[i];
    emu_lane_info& in = L.info;
    for (int a = 0; a < 3; a++) {
      in.tgpig[a] = g->gid[a];
      in.tpig[a] = g->gid[a] * d->threads[a] + in.tpitg[a];
    }
    L.state = RUNNABLE;
    L.sp = fiber_init(L.stack, kStack, fiber_main, &L);
  }
  while (g->live > 0 && !g->failed) {
    schedule_order(g);
    bool ran = false;
    for (int k = 0; k < g->n && !g->failed; k++) {
      Lane* L = &g->lanes[g->order[k]];
      if (L->state != RUNNABLE) continue;
      ran = true;
      cur = L;
#ifdef EMU_ASAN
      __sanitizer_start_switch_fiber(&g->sched_fake, L->stack, kStack);
#endif
      emu_switch(&g->sched_sp, L->sp);
#ifdef EMU_ASAN
      __sanitizer_finish_switch_fiber(g->sched_fake, nullptr, nullptr);
#endif
      cur = nullptr;
    }
    if (!ran && !g->failed) {
      char msg[EMU_ERR_LEN];
      int len = snprintf(msg, sizeof msg, "kernel %s, threadgroup (%u,%u,%u): deadlock or divergence, no thread can run: ",
                         g->k->name, g->gid[0], g->gid[1], g->gid[2]);
      describe_lanes(g, 0, g->n, msg + len, sizeof msg - len);
      fail_group(g, msg);
    }
  }
  free(g->tg);
  g->tg = nullptr;
}

struct Shared {
  emu_dispatch* d;
  const emu_kernel* k;
  std::atomic<uint64_t> next{0};
  uint64_t total;
  size_t tg_total;
  size_t tg_dyn_off[EMU_MAX_BINDINGS];
  std::mutex mu;
  bool failed = false;
};

// ---- faults ----------------------------------------------------------------------------------
// A fault in a kernel (SIGSEGV, SIGBUS, SIGFPE, SIGILL: a wild or misaligned access, an integer
// division by zero, a trap) fails its threadgroup instead of the process: the handler records the
// fault with the kernel, threadgroup and thread, and switches back to the threadgroup's scheduler,
// which abandons the threadgroup. Faults outside kernels go to the handler installed before (the
// Go runtime's, in a Go process). The ASan build leaves faults to AddressSanitizer, whose report
// the helper process returns.
const int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
struct sigaction old_actions[NSIG];

const char* fault_name(int sig, int code) {
  switch (sig) {
    case SIGFPE:
      return code == FPE_INTDIV ? "integer division by zero (SIGFPE)" : code == FPE_INTOVF ? "integer overflow (SIGFPE)" : "arithmetic fault (SIGFPE)";
    case SIGBUS:
      return code == BUS_ADRALN ? "misaligned memory access (SIGBUS)" : "bus error (SIGBUS)";
    case SIGILL:
      return "illegal instruction or trap (SIGILL)";
  }
  return "invalid or misaligned memory access (SIGSEGV)";
}

void on_fault(int sig, siginfo_t* si, void* uc) {
  Lane* L = cur;
  if (L && L->g && !L->g->failed) {
    Group* g = L->g;
    char msg[EMU_ERR_LEN];
    snprintf(msg, sizeof msg, "kernel %s, threadgroup (%u,%u,%u), thread %u (simdgroup %u lane %u): %s at address %p",
             g->k->name, g->gid[0], g->gid[1], g->gid[2], L->info.tiitg, L->info.simd_group, L->info.simd_lane,
             fault_name(sig, si->si_code), si->si_addr);
    fail_group(g, msg);
    // Never returning to the faulting code: unblock the signal the kernel blocked for the handler.
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, sig);
    pthread_sigmask(SIG_UNBLOCK, &m, nullptr);
    emu_switch(&L->sp, g->sched_sp);
    abort();  // never resumed
  }
  struct sigaction* o = &old_actions[sig];
  if (o->sa_flags & SA_SIGINFO) {
    o->sa_sigaction(sig, si, uc);
  } else if (o->sa_handler == SIG_IGN) {
    return;
  } else if (o->sa_handler == SIG_DFL) {
    signal(sig, SIG_DFL);
    raise(sig);
  } else {
    o->sa_handler(sig);
  }
}

pthread_once_t fault_once = PTHREAD_ONCE_INIT;
void install_fault_handlers() {
#ifndef EMU_ASAN
  for (int sig : kFaultSignals) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_fault;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&a.sa_mask);
    sigaction(sig, &a, &old_actions[sig]);
  }
#endif
}

// The alternate signal stack of a worker thread.
struct AltStack {
  void* mem;
  size_t size = 64 << 10;
  AltStack() {
    mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t st;
    memset(&st, 0, sizeof st);
    st.ss_sp = mem;
    st.ss_size = size;
    if (mem != MAP_FAILED) sigaltstack(&st, nullptr);
  }
  ~AltStack() {
    stack_t st;
    memset(&st, 0, sizeof st);
    st.ss_flags = SS_DISABLE;
    sigaltstack(&st, nullptr);
    if (mem != MAP_FAILED) munmap(mem, size);
  }
};

void* worker(void* arg) {
  Shared* s = (Shared*)arg;
  // Asynchronous signals go to the host's threads; the faults a kernel raises stay deliverable
  // here, on an alternate stack (a fiber that overflowed its stack has none left).
  sigset_t all;
  sigfillset(&all);
  for (int sig : kFaultSignals) sigdelset(&all, sig);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  AltStack alt;
  Group g;
  g.d = s->d;
  g.k = s->k;
  g.n = (int)(s->d->threads[0] * s->d->threads[1] * s->d->threads[2]);
  g.lanes.resize(g.n);
  g.order.resize(g.n);
  memcpy(g.tg_dyn_off, s->tg_dyn_off, sizeof g.tg_dyn_off);
  size_t per = kStack + kGuard;
  g.stacks_len = per * g.n;
  g.stacks = (char*)mmap(nullptr, g.stacks_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (g.stacks == MAP_FAILED) {
    std::lock_guard<std::mutex> lk(s->mu);
    if (!s->failed) { s->failed = true; snprintf(s->d->err, EMU_ERR_LEN, "cannot map %zu bytes of fiber stacks", g.stacks_len); }
    return nullptr;
  }
  uint32_t nsg = (g.n + kSimd - 1) / kSimd;
  const emu_dispatch* d = s->d;
  for (int i = 0; i < g.n; i++) {
    Lane& L = g.lanes[i];
    memset(&L, 0, sizeof L);
    L.g = &g;
    L.stack = g.stacks + per * i + kGuard;
    mprotect(g.stacks + per * i, kGuard, PROT_NONE);  // stack overflow faults instead of corrupting
    emu_lane_info& in = L.info;
    in.tpitg[0] = i % d->threads[0];
    in.tpitg[1] = i / d->threads[0] % d->threads[1];
    in.tpitg[2] = i / (d->threads[0] * d->threads[1]);
    for (int a = 0; a < 3; a++) {
      in.tptg[a] = d->threads[a];
      in.tgpg[a] = d->groups[a];
      in.tpg[a] = d->threads[a] * d->groups[a];
    }
    in.tiitg = i;
    in.simd_lane = i % kSimd;
    in.simd_group = i / kSimd;
    in.simd_width = kSimd;
    in.simd_groups = nsg;
  }
  cur_group = &g;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(s->mu);
      if (s->failed) break;
    }
    uint64_t idx = s->next.fetch_add(1);
    if (idx >= s->total) break;
    run_group(&g, idx, s->tg_total);
    if (g.failed) {
      std::lock_guard<std::mutex> lk(s->mu);
      if (!s->failed) { s->failed = true; snprintf(s->d->err, EMU_ERR_LEN, "%s", g.err); }
      break;
    }
  }
  cur_group = nullptr;
  munmap(g.stacks, g.stacks_len);
  return nullptr;
}


// ---- kernel-scope threadgroup variables ---------------------------------------------------------
// The compiler leaves one emu_tg_rec per threadgroup variable of each kernel instance in section
// emu_tg; the variables of one kernel are laid out in declaration order, each aligned, once.
extern "C" emu_tg_rec __start_emu_tg[] __attribute__((weak, visibility("hidden")));
extern "C" emu_tg_rec __stop_emu_tg[] __attribute__((weak, visibility("hidden")));

pthread_once_t tg_once = PTHREAD_ONCE_INIT;
std::map<const void*, uint32_t>* tg_totals;

void tg_layout() {
  tg_totals = new std::map<const void*, uint32_t>();
  std::vector<emu_tg_rec*> recs;
  if (__start_emu_tg && __stop_emu_tg)
    for (emu_tg_rec* r = __start_emu_tg; r < __stop_emu_tg; r++) recs.push_back(r);
  std::stable_sort(recs.begin(), recs.end(), [](const emu_tg_rec* a, const emu_tg_rec* b) {
    return a->anchor != b->anchor ? a->anchor < b->anchor : a->var < b->var;
  });
  for (emu_tg_rec* r : recs) {
    uint32_t& tot = (*tg_totals)[r->anchor];
    uint32_t off = (tot + r->align - 1) / r->align * r->align;
    r->off = off;
    tot = off + r->size;
  }
}

uint32_t static_tg_of(const void* anchor) {
  pthread_once(&tg_once, tg_layout);
  auto it = tg_totals->find(anchor);
  return it == tg_totals->end() ? 0 : it->second;
}
}  // namespace

extern "C" {

const emu_lane_info* emu_info(void) { return &cur->info; }

void emu_wait_barrier(uint32_t site, const char* what) {
  Lane* L = cur;
  L->state = WAIT_BARRIER;
  L->site = site;
  L->what = what;
  L->resolve = nullptr;
  try_resolve_barrier(L->g);
  yield_to_scheduler(L, false);
}

void emu_wait_simd(uint32_t site, const char* what, emu_resolver r, const void* in, void* out) {
  Lane* L = cur;
  L->state = WAIT_SIMD;
  L->site = site;
  L->what = what;
  L->resolve = r;
  L->in = in;
  L->out = out;
  try_resolve_simd(L->g, L->info.simd_group);
  yield_to_scheduler(L, false);
}

void emu_wait_group(uint32_t site, const char* what, emu_resolver r, const void* in, void* out) {
  Lane* L = cur;
  L->state = WAIT_GROUP;
  L->site = site;
  L->what = what;
  L->resolve = r;
  L->in = in;
  L->out = out;
  try_resolve_group(L->g);
  yield_to_scheduler(L, false);
}

uint64_t emu_seed(void) { return cur->g->d->seed; }

const uint32_t* emu_layout(uint64_t key, uint32_t slots) {
  static std::mutex mu;
  static std::map<std::pair<std::pair<uint64_t, uint64_t>, uint32_t>, std::vector<uint32_t>> cache;
  thread_local uint64_t last_seed, last_key;
  thread_local uint32_t last_slots;
  thread_local const uint32_t* last = nullptr;
  uint64_t seed = cur->g->d->seed;
  if (last && last_seed == seed && last_key == key && last_slots == slots) return last;
  std::lock_guard<std::mutex> lk(mu);
  std::vector<uint32_t>& p = cache[{{seed, key}, slots}];
  if (p.size() != slots) {
    p.resize(slots);
    for (uint32_t i = 0; i < slots; i++) p[i] = i;
    uint64_t rng = seed ^ (key * 0x9e3779b97f4a7c15ull) ^ 0x5851f42d4c957f2dull;
    for (uint32_t i = slots; i > 1; i--) {
      uint32_t j = (uint32_t)(splitmix(&rng) % i);
      uint32_t t = p[i - 1]; p[i - 1] = p[j]; p[j] = t;
    }
  }
  last_seed = seed, last_key = key, last_slots = slots, last = p.data();
  return last;
}

uintptr_t emu_tg_base(void) { return (uintptr_t)cur->g->tg; }

uintptr_t emu_tg_dynamic(int index) {
  Lane* L = cur;
  Group* g = L->g;
  if (index < 0 || index >= EMU_MAX_BINDINGS || g->d->tglen[index] == 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "threadgroup(%d) memory length not set", index);
    fail_lane(L, msg);
  }
  return (uintptr_t)(g->tg + g->tg_dyn_off[index]);
}

uintptr_t emu_buffer(int index) {
  Lane* L = cur;
  Group* g = L->g;
  if (index < 0 || index >= EMU_MAX_BINDINGS || g->d->buf[index] == 0) {
    char msg[128];
    snprintf(msg, sizeof msg, "buffer(%d) not bound", index);
    fail_lane(L, msg);
  }
  return (uintptr_t)g->d->buf[index];
}

uintptr_t emu_absent_arg(void) {
  static void* page = mmap(nullptr, 65536, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return page == MAP_FAILED ? 0 : (uintptr_t)page;
}

uint32_t emu_fc(int slot, int* defined) {
  const emu_dispatch* d = cur->g->d;
  if (slot < 0 || slot >= EMU_MAX_CONSTANTS) {
    *defined = 0;
    return 0;
  }
  *defined = d->fc_set[slot];
  return d->fc_val[slot];
}

void emu_fail(EMU_STR fmt, ...) {
  char msg[EMU_ERR_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fail_lane(cur, msg);
}

int emu_current(char* out, size_t n);

// os_log: formats fmt's printf conversions with args and writes one line to standard error.
struct emu_log_arg {
  int kind;
  uint64_t bits;
};
void emu_log(const char* subsystem, const char* category, int level, const char* fmt, const emu_log_arg* args, int n) {
  static const char* levels[] = {"debug", "info", "default", "error", "fault"};
  std::string out;
  int k = 0;
  for (const char* p = fmt; *p; p++) {
    if (*p != '%') {
      out += *p;
      continue;
    }
    if (p[1] == '%') {
      out += '%';
      p++;
      continue;
    }
    // One conversion: flags, width, precision, length modifiers, the conversion character.
    const char* q = p + 1;
    while (*q && strchr("-+ #0123456789.*", *q)) q++;
    while (*q && strchr("hlLqjzt", *q)) q++;
    if (!*q) break;
    std::string spec(p, q - p);
    while (!spec.empty() && strchr("hlLqjzt", spec.back())) spec.pop_back();
    char conv = *q;
    char buf[256];
    if (k >= n) {
      snprintf(buf, sizeof buf, "<missing argument>");
    } else {
      const emu_log_arg& a = args[k++];
      switch (conv) {
        case 'd': case 'i':
          snprintf(buf, sizeof buf, (spec + "lld").c_str(), a.kind == 'f' ? (long long)0 : (long long)(int64_t)a.bits);
          break;
        case 'u': case 'x': case 'X': case 'o': case 'c':
          snprintf(buf, sizeof buf, (spec + (conv == 'c' ? "c" : std::string("ll") + conv)).c_str(), (unsigned long long)a.bits);
          break;
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case 'a': case 'A': {
          uint32_t u = (uint32_t)a.bits;
          float f;
          memcpy(&f, &u, 4);
          snprintf(buf, sizeof buf, (spec + conv).c_str(), a.kind == 'f' ? (double)f : (double)(int64_t)a.bits);
          break;
        }
        case 's':
          snprintf(buf, sizeof buf, (spec + "s").c_str(), a.kind == 's' ? (const char*)(uintptr_t)a.bits : "<not a string>");
          break;
        case 'p':
          snprintf(buf, sizeof buf, "%p", (void*)(uintptr_t)a.bits);
          break;
        default:
          snprintf(buf, sizeof buf, "<%%%c?>", conv);
      }
    }
    out += buf;
    p = q;
  }
  char where[256];
  emu_current(where, sizeof where);
  fprintf(stderr, "emu log [%s:%s] %s: %s (%s)\n", subsystem, category, levels[level < 0 || level > 4 ? 2 : level], out.c_str(), where);
}

int emu_kernel_count(void) { return emu_nkernels; }
uint32_t emu_kernel_max_threads(int i) { return i < 0 || i >= emu_nkernels ? 0 : emu_kernels[i].max_threads; }

uint32_t emu_kernel_static_tg(int i) {
  if (i < 0 || i >= emu_nkernels) return 0;
  return static_tg_of(emu_kernels[i].anchor);
}

// Context of the running thread for fault reports (ASan death callback).
int emu_current(char* out, size_t n) {
  Group* g = cur_group;
  if (!g) return 0;
  if (cur)
    return snprintf(out, n, "kernel %s, threadgroup (%u,%u,%u), thread %u (simdgroup %u lane %u), %s schedule",
                    g->k->name, g->gid[0], g->gid[1], g->gid[2], cur->info.tiitg, cur->info.simd_group,
                    cur->info.simd_lane, schedule_name(g->d->schedule));
  return snprintf(out, n, "kernel %s, threadgroup (%u,%u,%u)", g->k->name, g->gid[0], g->gid[1], g->gid[2]);
}

int emu_run(emu_dispatch* d) {
  d->err[0] = 0;
  if (d->kernel < 0 || d->kernel >= emu_nkernels) {
    snprintf(d->err, EMU_ERR_LEN, "no kernel %d", d->kernel);
    return 1;
  }
  const emu_kernel* k = &emu_kernels[d->kernel];
  d->static_tg = static_tg_of(k->anchor);
  pthread_once(&fault_once, install_fault_handlers);
  uint64_t nthreads = (uint64_t)d->threads[0] * d->threads[1] * d->threads[2];
  uint64_t total = (uint64_t)d->groups[0] * d->groups[1] * d->groups[2];
  if (nthreads == 0 || nthreads > k->max_threads) {
    snprintf(d->err, EMU_ERR_LEN, "kernel %s: %llu threads per threadgroup (%ux%ux%u), limit %u", k->name,
             (unsigned long long)nthreads, d->threads[0], d->threads[1], d->threads[2], k->max_threads);
    return 1;
  }
  if (total == 0) return 0;
  Shared s;
  s.d = d;
  s.k = k;
  s.total = total;
  size_t off = (d->static_tg + 15) / 16 * 16;
  for (int i = 0; i < EMU_MAX_BINDINGS; i++) {
    s.tg_dyn_off[i] = off;
    off += ((d->tglen[i] & ~EMU_TG_SET) + 15) / 16 * 16;
  }
  s.tg_total = off;
  if (off > d->tg_limit) {
    snprintf(d->err, EMU_ERR_LEN, "kernel %s: threadgroup memory %zu bytes (static %u + dynamic %zu) exceeds the %u-byte limit",
             k->name, off, d->static_tg, off - (d->static_tg + 15) / 16 * 16, d->tg_limit);
    return 1;
  }
  int nw = d->workers < 1 ? 1 : d->workers;
  if ((uint64_t)nw > total) nw = (int)total;
  std::vector<pthread_t> th(nw);
  for (int i = 0; i < nw; i++) pthread_create(&th[i], nullptr, worker, &s);
  for (int i = 0; i < nw; i++) pthread_join(th[i], nullptr);
  if (s.failed) return 1;
  return 0;
}

}  // extern "C"

extern "C" size_t emu_dispatch_size(void) { return sizeof(emu_dispatch); }
