// Legal: functions and member functions overloaded by address space.
#include <metal_stdlib>
using namespace metal;
int where(device const float*) { return 1; }
int where(threadgroup const float*) { return 2; }
int where(constant float*) { return 3; }
int where(thread const float*) { return 4; }
struct Cell {
  float v;
  int space() const device { return 1; }
  int space() const threadgroup { return 2; }
  int space() const constant { return 3; }
  int space() const thread { return 4; }
};
kernel void k(device float* y [[buffer(0)]], constant float* c [[buffer(1)]], device Cell* dc [[buffer(2)]],
              constant Cell& cc [[buffer(3)]], uint i [[thread_index_in_threadgroup]]) {
  threadgroup float t[4];
  threadgroup Cell tc;
  float x = 0;
  Cell lc{0};
  t[i % 4] = 0;
  y[i] = where(y) * 1000 + where(t) * 100 + where(c) * 10 + where(&x);
  y[i] += dc->space() * 1000 + tc.space() * 100 + cc.space() * 10 + lc.space();
}
