// Helper process of the ASan build: reads buffers and dispatches on stdin, runs them with every
// buffer allocated at its exact length (so AddressSanitizer sees each buffer's bounds), and writes
// the dispatch results and buffer contents to stdout. On a sanitizer fault the death callback
// names the kernel, threadgroup and thread that faulted.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include <sanitizer/common_interface_defs.h>

#include "emu_rt.h"

extern "C" int emu_current(char* out, size_t n);

static void die(const char* msg) {
  fprintf(stderr, "emu driver: %s\n", msg);
  exit(3);
}

static void read_all(void* p, size_t n) {
  if (n && fread(p, 1, n, stdin) != n) die("short read");
}

static void write_all(const void* p, size_t n) {
  if (n && fwrite(p, 1, n, stdout) != n) die("short write");
}

static void on_death(void) {
  char buf[512];
  if (emu_current(buf, sizeof buf) > 0) fprintf(stderr, "emu: fault in %s\n", buf);
}

int main() {
  __sanitizer_set_death_callback(on_death);
  char magic[4];
  read_all(magic, 4);
  if (memcmp(magic, "EMUQ", 4) == 0) {
    // Query: the static threadgroup memory and thread limit of every kernel.
    uint32_t n = (uint32_t)emu_kernel_count();
    write_all(&n, 4);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t v[2] = {emu_kernel_static_tg((int)i), emu_kernel_max_threads((int)i)};
      write_all(v, 8);
    }
    fflush(stdout);
    return 0;
  }
  if (memcmp(magic, "EMU1", 4) != 0) die("bad request");
  uint32_t nbuf;
  read_all(&nbuf, 4);
  std::vector<char*> bufs(nbuf);
  std::vector<uint64_t> lens(nbuf);
  for (uint32_t i = 0; i < nbuf; i++) {
    read_all(&lens[i], 8);
    bufs[i] = (char*)malloc(lens[i] ? lens[i] : 1);
    read_all(bufs[i], lens[i]);
  }
  uint32_t nd;
  read_all(&nd, 4);
  std::vector<emu_dispatch> ds(nd);
  for (uint32_t i = 0; i < nd; i++) read_all(&ds[i], sizeof(emu_dispatch));
  uint32_t status = 0;
  for (uint32_t i = 0; i < nd && status == 0; i++) {
    emu_dispatch& d = ds[i];
    for (int b = 0; b < EMU_MAX_BINDINGS; b++) {
      if (!d.buf[b]) continue;
      uint64_t id = (d.buf[b] >> 40) - 1, off = d.buf[b] & ((1ull << 40) - 1);
      if (id >= nbuf || off > lens[id]) die("bad buffer reference");
      d.buf[b] = (uint64_t)(uintptr_t)(bufs[id] + off);
    }
    if (emu_run(&d) != 0) status = 1;
  }
  write_all(&status, 4);
  write_all(&nd, 4);
  for (uint32_t i = 0; i < nd; i++) write_all(&ds[i], sizeof(emu_dispatch));
  if (status == 0)
    for (uint32_t i = 0; i < nbuf; i++) write_all(bufs[i], lens[i]);
  fflush(stdout);
  for (uint32_t i = 0; i < nbuf; i++) free(bufs[i]);
  return 0;
}
