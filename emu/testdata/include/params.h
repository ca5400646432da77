// Parameters shared by host and kernels (prepended with -include).
#pragma once
struct ScaleParams {
  uint n;
  float scale;
};
#define SCALE_OF(p) ((p).scale)
