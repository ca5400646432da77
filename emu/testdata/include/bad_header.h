// A header that breaks a rule.
struct ScaleParams {
  uint n;
  float scale;
};
#define SCALE_OF(p) ((p).scale)
float global_scale = 1; // program scope, not constant
