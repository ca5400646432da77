// Generated member lists of swizzles for the struct vectors of emu_types.h (bool and bfloat
// vectors): every sequence of 1 to 4 of the first N of x, y, z, w. Each member is a proxy over the
// same storage as the vector's elements; see emu_detail::swz in emu_types.h.
#pragma once
#define EMU_SWIZZLES_2(E) \
  ::metal::emu_detail::swz1<E, 2, 0> x; ::metal::emu_detail::swz1<E, 2, 1> y; ::metal::emu_detail::swz<E, 2, 0, 0> xx; ::metal::emu_detail::swz<E, 2, 0, 1> xy; \
  ::metal::emu_detail::swz<E, 2, 1, 0> yx; ::metal::emu_detail::swz<E, 2, 1, 1> yy; ::metal::emu_detail::swz<E, 2, 0, 0, 0> xxx; ::metal::emu_detail::swz<E, 2, 0, 0, 1> xxy; \
  ::metal::emu_detail::swz<E, 2, 0, 1, 0> xyx; ::metal::emu_detail::swz<E, 2, 0, 1, 1> xyy; ::metal::emu_detail::swz<E, 2, 1, 0, 0> yxx; ::metal::emu_detail::swz<E, 2, 1, 0, 1> yxy; \
  ::metal::emu_detail::swz<E, 2, 1, 1, 0> yyx; ::metal::emu_detail::swz<E, 2, 1, 1, 1> yyy; ::metal::emu_detail::swz<E, 2, 0, 0, 0, 0> xxxx; ::metal::emu_detail::swz<E, 2, 0, 0, 0, 1> xxxy; \
  ::metal::emu_detail::swz<E, 2, 0, 0, 1, 0> xxyx; ::metal::emu_detail::swz<E, 2, 0, 0, 1, 1> xxyy; ::metal::emu_detail::swz<E, 2, 0, 1, 0, 0> xyxx; ::metal::emu_detail::swz<E, 2, 0, 1, 0, 1> xyxy; \
  ::metal::emu_detail::swz<E, 2, 0, 1, 1, 0> xyyx; ::metal::emu_detail::swz<E, 2, 0, 1, 1, 1> xyyy; ::metal::emu_detail::swz<E, 2, 1, 0, 0, 0> yxxx; ::metal::emu_detail::swz<E, 2, 1, 0, 0, 1> yxxy; \
  ::metal::emu_detail::swz<E, 2, 1, 0, 1, 0> yxyx; ::metal::emu_detail::swz<E, 2, 1, 0, 1, 1> yxyy; ::metal::emu_detail::swz<E, 2, 1, 1, 0, 0> yyxx; ::metal::emu_detail::swz<E, 2, 1, 1, 0, 1> yyxy; \
  ::metal::emu_detail::swz<E, 2, 1, 1, 1, 0> yyyx; ::metal::emu_detail::swz<E, 2, 1, 1, 1, 1> yyyy; \

#define EMU_SWIZZLES_3(E) \
  ::metal::emu_detail::swz1<E, 3, 0> x; ::metal::emu_detail::swz1<E, 3, 1> y; ::metal::emu_detail::swz1<E, 3, 2> z; ::metal::emu_detail::swz<E, 3, 0, 0> xx; \
  ::metal::emu_detail::swz<E, 3, 0, 1> xy; ::metal::emu_detail::swz<E, 3, 0, 2> xz; ::metal::emu_detail::swz<E, 3, 1, 0> yx; ::metal::emu_detail::swz<E, 3, 1, 1> yy; \
  ::metal::emu_detail::swz<E, 3, 1, 2> yz; ::metal::emu_detail::swz<E, 3, 2, 0> zx; ::metal::emu_detail::swz<E, 3, 2, 1> zy; ::metal::emu_detail::swz<E, 3, 2, 2> zz; \
  ::metal::emu_detail::swz<E, 3, 0, 0, 0> xxx; ::metal::emu_detail::swz<E, 3, 0, 0, 1> xxy; ::metal::emu_detail::swz<E, 3, 0, 0, 2> xxz; ::metal::emu_detail::swz<E, 3, 0, 1, 0> xyx; \
  ::metal::emu_detail::swz<E, 3, 0, 1, 1> xyy; ::metal::emu_detail::swz<E, 3, 0, 1, 2> xyz; ::metal::emu_detail::swz<E, 3, 0, 2, 0> xzx; ::metal::emu_detail::swz<E, 3, 0, 2, 1> xzy; \
  ::metal::emu_detail::swz<E, 3, 0, 2, 2> xzz; ::metal::emu_detail::swz<E, 3, 1, 0, 0> yxx; ::metal::emu_detail::swz<E, 3, 1, 0, 1> yxy; ::metal::emu_detail::swz<E, 3, 1, 0, 2> yxz; \
  ::metal::emu_detail::swz<E, 3, 1, 1, 0> yyx; ::metal::emu_detail::swz<E, 3, 1, 1, 1> yyy; ::metal::emu_detail::swz<E, 3, 1, 1, 2> yyz; ::metal::emu_detail::swz<E, 3, 1, 2, 0> yzx; \
  ::metal::emu_detail::swz<E, 3, 1, 2, 1> yzy; ::metal::emu_detail::swz<E, 3, 1, 2, 2> yzz; ::metal::emu_detail::swz<E, 3, 2, 0, 0> zxx; ::metal::emu_detail::swz<E, 3, 2, 0, 1> zxy; \
  ::metal::emu_detail::swz<E, 3, 2, 0, 2> zxz; ::metal::emu_detail::swz<E, 3, 2, 1, 0> zyx; ::metal::emu_detail::swz<E, 3, 2, 1, 1> zyy; ::metal::emu_detail::swz<E, 3, 2, 1, 2> zyz; \
  ::metal::emu_detail::swz<E, 3, 2, 2, 0> zzx; ::metal::emu_detail::swz<E, 3, 2, 2, 1> zzy; ::metal::emu_detail::swz<E, 3, 2, 2, 2> zzz; ::metal::emu_detail::swz<E, 3, 0, 0, 0, 0> xxxx; \
  ::metal::emu_detail::swz<E, 3, 0, 0, 0, 1> xxxy; ::metal::emu_detail::swz<E, 3, 0, 0, 0, 2> xxxz; ::metal::emu_detail::swz<E, 3, 0, 0, 1, 0> xxyx; ::metal::emu_detail::swz<E, 3, 0, 0, 1, 1> xxyy; \
  ::metal::emu_detail::swz<E, 3, 0, 0, 1, 2> xxyz; ::metal::emu_detail::swz<E, 3, 0, 0, 2, 0> xxzx; ::metal::emu_detail::swz<E, 3, 0, 0, 2, 1> xxzy; ::metal::emu_detail::swz<E, 3, 0, 0, 2, 2> xxzz; \
  ::metal::emu_detail::swz<E, 3, 0, 1, 0, 0> xyxx; ::metal::emu_detail::swz<E, 3, 0, 1, 0, 1> xyxy; ::metal::emu_detail::swz<E, 3, 0, 1, 0, 2> xyxz; ::metal::emu_detail::swz<E, 3, 0, 1, 1, 0> xyyx; \
  ::metal::emu_detail::swz<E, 3, 0, 1, 1, 1> xyyy; ::metal::emu_detail::swz<E, 3, 0, 1, 1, 2> xyyz; ::metal::emu_detail::swz<E, 3, 0, 1, 2, 0> xyzx; ::metal::emu_detail::swz<E, 3, 0, 1, 2, 1> xyzy; \
  ::metal::emu_detail::swz<E, 3, 0, 1, 2, 2> xyzz; ::metal::emu_detail::swz<E, 3, 0, 2, 0, 0> xzxx; ::metal::emu_detail::swz<E, 3, 0, 2, 0, 1> xzxy; ::metal::emu_detail::swz<E, 3, 0, 2, 0, 2> xzxz; \
  ::metal::emu_detail::swz<E, 3, 0, 2, 1, 0> xzyx; ::metal::emu_detail::swz<E, 3, 0, 2, 1, 1> xzyy; ::metal::emu_detail::swz<E, 3, 0, 2, 1, 2> xzyz; ::metal::emu_detail::swz<E, 3, 0, 2, 2, 0> xzzx; \
  ::metal::emu_detail::swz<E, 3, 0, 2, 2, 1> xzzy; ::metal::emu_detail::swz<E, 3, 0, 2, 2, 2> xzzz; ::metal::emu_detail::swz<E, 3, 1, 0, 0, 0> yxxx; ::metal::emu_detail::swz<E, 3, 1, 0, 0, 1> yxxy; \
  ::metal::emu_detail::swz<E, 3, 1, 0, 0, 2> yxxz; ::metal::emu_detail::swz<E, 3, 1, 0, 1, 0> yxyx; ::metal::emu_detail::swz<E, 3, 1, 0, 1, 1> yxyy; ::metal::emu_detail::swz<E, 3, 1, 0, 1, 2> yxyz; \
  ::metal::emu_detail::swz<E, 3, 1, 0, 2, 0> yxzx; ::metal::emu_detail::swz<E, 3, 1, 0, 2, 1> yxzy; ::metal::emu_detail::swz<E, 3, 1, 0, 2, 2> yxzz; ::metal::emu_detail::swz<E, 3, 1, 1, 0, 0> yyxx; \
  ::metal::emu_detail::swz<E, 3, 1, 1, 0, 1> yyxy; ::metal::emu_detail::swz<E, 3, 1, 1, 0, 2> yyxz; ::metal::emu_detail::swz<E, 3, 1, 1, 1, 0> yyyx; ::metal::emu_detail::swz<E, 3, 1, 1, 1, 1> yyyy; \
  ::metal::emu_detail::swz<E, 3, 1, 1, 1, 2> yyyz; ::metal::emu_detail::swz<E, 3, 1, 1, 2, 0> yyzx; ::metal::emu_detail::swz<E, 3, 1, 1, 2, 1> yyzy; ::metal::emu_detail::swz<E, 3, 1, 1, 2, 2> yyzz; \
  ::metal::emu_detail::swz<E, 3, 1, 2, 0, 0> yzxx; ::metal::emu_detail::swz<E, 3, 1, 2, 0, 1> yzxy; ::metal::emu_detail::swz<E, 3, 1, 2, 0, 2> yzxz; ::metal::emu_detail::swz<E, 3, 1, 2, 1, 0> yzyx; \
  ::metal::emu_detail::swz<E, 3, 1, 2, 1, 1> yzyy; ::metal::emu_detail::swz<E, 3, 1, 2, 1, 2> yzyz; ::metal::emu_detail::swz<E, 3, 1, 2, 2, 0> yzzx; ::metal::emu_detail::swz<E, 3, 1, 2, 2, 1> yzzy; \
  ::metal::emu_detail::swz<E, 3, 1, 2, 2, 2> yzzz; ::metal::emu_detail::swz<E, 3, 2, 0, 0, 0> zxxx; ::metal::emu_detail::swz<E, 3, 2, 0, 0, 1> zxxy; ::metal::emu_detail::swz<E, 3, 2, 0, 0, 2> zxxz; \
  ::metal::emu_detail::swz<E, 3, 2, 0, 1, 0> zxyx; ::metal::emu_detail::swz<E, 3, 2, 0, 1, 1> zxyy; ::metal::emu_detail::swz<E, 3, 2, 0, 1, 2> zxyz; ::metal::emu_detail::swz<E, 3, 2, 0, 2, 0> zxzx; \
  ::metal::emu_detail::swz<E, 3, 2, 0, 2, 1> zxzy; ::metal::emu_detail::swz<E, 3, 2, 0, 2, 2> zxzz; ::metal::emu_detail::swz<E, 3, 2, 1, 0, 0> zyxx; ::metal::emu_detail::swz<E, 3, 2, 1, 0, 1> zyxy; \
  ::metal::emu_detail::swz<E, 3, 2, 1, 0, 2> zyxz; ::metal::emu_detail::swz<E, 3, 2, 1, 1, 0> zyyx; ::metal::emu_detail::swz<E, 3, 2, 1, 1, 1> zyyy; ::metal::emu_detail::swz<E, 3, 2, 1, 1, 2> zyyz; \
  ::metal::emu_detail::swz<E, 3, 2, 1, 2, 0> zyzx; ::metal::emu_detail::swz<E, 3, 2, 1, 2, 1> zyzy; ::metal::emu_detail::swz<E, 3, 2, 1, 2, 2> zyzz; ::metal::emu_detail::swz<E, 3, 2, 2, 0, 0> zzxx; \
  ::metal::emu_detail::swz<E, 3, 2, 2, 0, 1> zzxy; ::metal::emu_detail::swz<E, 3, 2, 2, 0, 2> zzxz; ::metal::emu_detail::swz<E, 3, 2, 2, 1, 0> zzyx; ::metal::emu_detail::swz<E, 3, 2, 2, 1, 1> zzyy; \
  ::metal::emu_detail::swz<E, 3, 2, 2, 1, 2> zzyz; ::metal::emu_detail::swz<E, 3, 2, 2, 2, 0> zzzx; ::metal::emu_detail::swz<E, 3, 2, 2, 2, 1> zzzy; ::metal::emu_detail::swz<E, 3, 2, 2, 2, 2> zzzz; \

#define EMU_SWIZZLES_4(E) \
  ::metal::emu_detail::swz1<E, 4, 0> x; ::metal::emu_detail::swz1<E, 4, 1> y; ::metal::emu_detail::swz1<E, 4, 2> z; ::metal::emu_detail::swz1<E, 4, 3> w; \
  ::metal::emu_detail::swz<E, 4, 0, 0> xx; ::metal::emu_detail::swz<E, 4, 0, 1> xy; ::metal::emu_detail::swz<E, 4, 0, 2> xz; ::metal::emu_detail::swz<E, 4, 0, 3> xw; \
  ::metal::emu_detail::swz<E, 4, 1, 0> yx; ::metal::emu_detail::swz<E, 4, 1, 1> yy; ::metal::emu_detail::swz<E, 4, 1, 2> yz; ::metal::emu_detail::swz<E, 4, 1, 3> yw; \
  ::metal::emu_detail::swz<E, 4, 2, 0> zx; ::metal::emu_detail::swz<E, 4, 2, 1> zy; ::metal::emu_detail::swz<E, 4, 2, 2> zz; ::metal::emu_detail::swz<E, 4, 2, 3> zw; \
  ::metal::emu_detail::swz<E, 4, 3, 0> wx; ::metal::emu_detail::swz<E, 4, 3, 1> wy; ::metal::emu_detail::swz<E, 4, 3, 2> wz; ::metal::emu_detail::swz<E, 4, 3, 3> ww; \
  ::metal::emu_detail::swz<E, 4, 0, 0, 0> xxx; ::metal::emu_detail::swz<E, 4, 0, 0, 1> xxy; ::metal::emu_detail::swz<E, 4, 0, 0, 2> xxz; ::metal::emu_detail::swz<E, 4, 0, 0, 3> xxw; \
  ::metal::emu_detail::swz<E, 4, 0, 1, 0> xyx; ::metal::emu_detail::swz<E, 4, 0, 1, 1> xyy; ::metal::emu_detail::swz<E, 4, 0, 1, 2> xyz; ::metal::emu_detail::swz<E, 4, 0, 1, 3> xyw; \
  ::metal::emu_detail::swz<E, 4, 0, 2, 0> xzx; ::metal::emu_detail::swz<E, 4, 0, 2, 1> xzy; ::metal::emu_detail::swz<E, 4, 0, 2, 2> xzz; ::metal::emu_detail::swz<E, 4, 0, 2, 3> xzw; \
  ::metal::emu_detail::swz<E, 4, 0, 3, 0> xwx; ::metal::emu_detail::swz<E, 4, 0, 3, 1> xwy; ::metal::emu_detail::swz<E, 4, 0, 3, 2> xwz; ::metal::emu_detail::swz<E, 4, 0, 3, 3> xww; \
  ::metal::emu_detail::swz<E, 4, 1, 0, 0> yxx; ::metal::emu_detail::swz<E, 4, 1, 0, 1> yxy; ::metal::emu_detail::swz<E, 4, 1, 0, 2> yxz; ::metal::emu_detail::swz<E, 4, 1, 0, 3> yxw; \
  ::metal::emu_detail::swz<E, 4, 1, 1, 0> yyx; ::metal::emu_detail::swz<E, 4, 1, 1, 1> yyy; ::metal::emu_detail::swz<E, 4, 1, 1, 2> yyz; ::metal::emu_detail::swz<E, 4, 1, 1, 3> yyw; \
  ::metal::emu_detail::swz<E, 4, 1, 2, 0> yzx; ::metal::emu_detail::swz<E, 4, 1, 2, 1> yzy; ::metal::emu_detail::swz<E, 4, 1, 2, 2> yzz; ::metal::emu_detail::swz<E, 4, 1, 2, 3> yzw; \
  ::metal::emu_detail::swz<E, 4, 1, 3, 0> ywx; ::metal::emu_detail::swz<E, 4, 1, 3, 1> ywy; ::metal::emu_detail::swz<E, 4, 1, 3, 2> ywz; ::metal::emu_detail::swz<E, 4, 1, 3, 3> yww; \
  ::metal::emu_detail::swz<E, 4, 2, 0, 0> zxx; ::metal::emu_detail::swz<E, 4, 2, 0, 1> zxy; ::metal::emu_detail::swz<E, 4, 2, 0, 2> zxz; ::metal::emu_detail::swz<E, 4, 2, 0, 3> zxw; \
  ::metal::emu_detail::swz<E, 4, 2, 1, 0> zyx; ::metal::emu_detail::swz<E, 4, 2, 1, 1> zyy; ::metal::emu_detail::swz<E, 4, 2, 1, 2> zyz; ::metal::emu_detail::swz<E, 4, 2, 1, 3> zyw; \
  ::metal::emu_detail::swz<E, 4, 2, 2, 0> zzx; ::metal::emu_detail::swz<E, 4, 2, 2, 1> zzy; ::metal::emu_detail::swz<E, 4, 2, 2, 2> zzz; ::metal::emu_detail::swz<E, 4, 2, 2, 3> zzw; \
  ::metal::emu_detail::swz<E, 4, 2, 3, 0> zwx; ::metal::emu_detail::swz<E, 4, 2, 3, 1> zwy; ::metal::emu_detail::swz<E, 4, 2, 3, 2> zwz; ::metal::emu_detail::swz<E, 4, 2, 3, 3> zww; \
  ::metal::emu_detail::swz<E, 4, 3, 0, 0> wxx; ::metal::emu_detail::swz<E, 4, 3, 0, 1> wxy; ::metal::emu_detail::swz<E, 4, 3, 0, 2> wxz; ::metal::emu_detail::swz<E, 4, 3, 0, 3> wxw; \
  ::metal::emu_detail::swz<E, 4, 3, 1, 0> wyx; ::metal::emu_detail::swz<E, 4, 3, 1, 1> wyy; ::metal::emu_detail::swz<E, 4, 3, 1, 2> wyz; ::metal::emu_detail::swz<E, 4, 3, 1, 3> wyw; \
  ::metal::emu_detail::swz<E, 4, 3, 2, 0> wzx; ::metal::emu_detail::swz<E, 4, 3, 2, 1> wzy; ::metal::emu_detail::swz<E, 4, 3, 2, 2> wzz; ::metal::emu_detail::swz<E, 4, 3, 2, 3> wzw; \
  ::metal::emu_detail::swz<E, 4, 3, 3, 0> wwx; ::metal::emu_detail::swz<E, 4, 3, 3, 1> wwy; ::metal::emu_detail::swz<E, 4, 3, 3, 2> wwz; ::metal::emu_detail::swz<E, 4, 3, 3, 3> www; \
  ::metal::emu_detail::swz<E, 4, 0, 0, 0, 0> xxxx; ::metal::emu_detail::swz<E, 4, 0, 0, 0, 1> xxxy; ::metal::emu_detail::swz<E, 4, 0, 0, 0, 2> xxxz; ::metal::emu_detail::swz<E, 4, 0, 0, 0, 3> xxxw; \
  ::metal::emu_detail::swz<E, 4, 0, 0, 1, 0> xxyx; ::metal::emu_detail::swz<E, 4, 0, 0, 1, 1> xxyy; ::metal::emu_detail::swz<E, 4, 0, 0, 1, 2> xxyz; ::metal::emu_detail::swz<E, 4, 0, 0, 1, 3> xxyw; \
  ::metal::emu_detail::swz<E, 4, 0, 0, 2, 0> xxzx; ::metal::emu_detail::swz<E, 4, 0, 0, 2, 1> xxzy; ::metal::emu_detail::swz<E, 4, 0, 0, 2, 2> xxzz; ::metal::emu_detail::swz<E, 4, 0, 0, 2, 3> xxzw; \
  ::metal::emu_detail::swz<E, 4, 0, 0, 3, 0> xxwx; ::metal::emu_detail::swz<E, 4, 0, 0, 3, 1> xxwy; ::metal::emu_detail::swz<E, 4, 0, 0, 3, 2> xxwz; ::metal::emu_detail::swz<E, 4, 0, 0, 3, 3> xxww; \
  ::metal::emu_detail::swz<E, 4, 0, 1, 0, 0> xyxx; ::metal::emu_detail::swz<E, 4, 0, 1, 0, 1> xyxy; ::metal::emu_detail::swz<E, 4, 0, 1, 0, 2> xyxz; ::metal::emu_detail::swz<E, 4, 0, 1, 0, 3> xyxw; \
  ::metal::emu_detail::swz<E, 4, 0, 1, 1, 0> xyyx; ::metal::emu_detail::swz<E, 4, 0, 1, 1, 1> xyyy; ::metal::emu_detail::swz<E, 4, 0, 1, 1, 2> xyyz; ::metal::emu_detail::swz<E, 4, 0, 1, 1, 3> xyyw; \
  ::metal::emu_detail::swz<E, 4, 0, 1, 2, 0> xyzx; ::metal::emu_detail::swz<E, 4, 0, 1, 2, 1> xyzy; ::metal::emu_detail::swz<E, 4, 0, 1, 2, 2> xyzz; ::metal::emu_detail::swz<E, 4, 0, 1, 2, 3> xyzw; \
  ::metal::emu_detail::swz<E, 4, 0, 1, 3, 0> xywx; ::metal::emu_detail::swz<E, 4, 0, 1, 3, 1> xywy; ::metal::emu_detail::swz<E, 4, 0, 1, 3, 2> xywz; ::metal::emu_detail::swz<E, 4, 0, 1, 3, 3> xyww; \
  ::metal::emu_detail::swz<E, 4, 0, 2, 0, 0> xzxx; ::metal::emu_detail::swz<E, 4, 0, 2, 0, 1> xzxy; ::metal::emu_detail::swz<E, 4, 0, 2, 0, 2> xzxz; ::metal::emu_detail::swz<E, 4, 0, 2, 0, 3> xzxw; \
  ::metal::emu_detail::swz<E, 4, 0, 2, 1, 0> xzyx; ::metal::emu_detail::swz<E, 4, 0, 2, 1, 1> xzyy; ::metal::emu_detail::swz<E, 4, 0, 2, 1, 2> xzyz; ::metal::emu_detail::swz<E, 4, 0, 2, 1, 3> xzyw; \
  ::metal::emu_detail::swz<E, 4, 0, 2, 2, 0> xzzx; ::metal::emu_detail::swz<E, 4, 0, 2, 2, 1> xzzy; ::metal::emu_detail::swz<E, 4, 0, 2, 2, 2> xzzz; ::metal::emu_detail::swz<E, 4, 0, 2, 2, 3> xzzw; \
  ::metal::emu_detail::swz<E, 4, 0, 2, 3, 0> xzwx; ::metal::emu_detail::swz<E, 4, 0, 2, 3, 1> xzwy; ::metal::emu_detail::swz<E, 4, 0, 2, 3, 2> xzwz; ::metal::emu_detail::swz<E, 4, 0, 2, 3, 3> xzww; \
  ::metal::emu_detail::swz<E, 4, 0, 3, 0, 0> xwxx; ::metal::emu_detail::swz<E, 4, 0, 3, 0, 1> xwxy; ::metal::emu_detail::swz<E, 4, 0, 3, 0, 2> xwxz; ::metal::emu_detail::swz<E, 4, 0, 3, 0, 3> xwxw; \
  ::metal::emu_detail::swz<E, 4, 0, 3, 1, 0> xwyx; ::metal::emu_detail::swz<E, 4, 0, 3, 1, 1> xwyy; ::metal::emu_detail::swz<E, 4, 0, 3, 1, 2> xwyz; ::metal::emu_detail::swz<E, 4, 0, 3, 1, 3> xwyw; \
  ::metal::emu_detail::swz<E, 4, 0, 3, 2, 0> xwzx; ::metal::emu_detail::swz<E, 4, 0, 3, 2, 1> xwzy; ::metal::emu_detail::swz<E, 4, 0, 3, 2, 2> xwzz; ::metal::emu_detail::swz<E, 4, 0, 3, 2, 3> xwzw; \
  ::metal::emu_detail::swz<E, 4, 0, 3, 3, 0> xwwx; ::metal::emu_detail::swz<E, 4, 0, 3, 3, 1> xwwy; ::metal::emu_detail::swz<E, 4, 0, 3, 3, 2> xwwz; ::metal::emu_detail::swz<E, 4, 0, 3, 3, 3> xwww; \
  ::metal::emu_detail::swz<E, 4, 1, 0, 0, 0> yxxx; ::metal::emu_detail::swz<E, 4, 1, 0, 0, 1> yxxy; ::metal::emu_detail::swz<E, 4, 1, 0, 0, 2> yxxz; ::metal::emu_detail::swz<E, 4, 1, 0, 0, 3> yxxw; \
  ::metal::emu_detail::swz<E, 4, 1, 0, 1, 0> yxyx; ::metal::emu_detail::swz<E, 4, 1, 0, 1, 1> yxyy; ::metal::emu_detail::swz<E, 4, 1, 0, 1, 2> yxyz; ::metal::emu_detail::swz<E, 4, 1, 0, 1, 3> yxyw; \
  ::metal::emu_detail::swz<E, 4, 1, 0, 2, 0> yxzx; ::metal::emu_detail::swz<E, 4, 1, 0, 2, 1> yxzy; ::metal::emu_detail::swz<E, 4, 1, 0, 2, 2> yxzz; ::metal::emu_detail::swz<E, 4, 1, 0, 2, 3> yxzw; \
  ::metal::emu_detail::swz<E, 4, 1, 0, 3, 0> yxwx; ::metal::emu_detail::swz<E, 4, 1, 0, 3, 1> yxwy; ::metal::emu_detail::swz<E, 4, 1, 0, 3, 2> yxwz; ::metal::emu_detail::swz<E, 4, 1, 0, 3, 3> yxww; \
  ::metal::emu_detail::swz<E, 4, 1, 1, 0, 0> yyxx; ::metal::emu_detail::swz<E, 4, 1, 1, 0, 1> yyxy; ::metal::emu_detail::swz<E, 4, 1, 1, 0, 2> yyxz; ::metal::emu_detail::swz<E, 4, 1, 1, 0, 3> yyxw; \
  ::metal::emu_detail::swz<E, 4, 1, 1, 1, 0> yyyx; ::metal::emu_detail::swz<E, 4, 1, 1, 1, 1> yyyy; ::metal::emu_detail::swz<E, 4, 1, 1, 1, 2> yyyz; ::metal::emu_detail::swz<E, 4, 1, 1, 1, 3> yyyw; \
  ::metal::emu_detail::swz<E, 4, 1, 1, 2, 0> yyzx; ::metal::emu_detail::swz<E, 4, 1, 1, 2, 1> yyzy; ::metal::emu_detail::swz<E, 4, 1, 1, 2, 2> yyzz; ::metal::emu_detail::swz<E, 4, 1, 1, 2, 3> yyzw; \
  ::metal::emu_detail::swz<E, 4, 1, 1, 3, 0> yywx; ::metal::emu_detail::swz<E, 4, 1, 1, 3, 1> yywy; ::metal::emu_detail::swz<E, 4, 1, 1, 3, 2> yywz; ::metal::emu_detail::swz<E, 4, 1, 1, 3, 3> yyww; \
  ::metal::emu_detail::swz<E, 4, 1, 2, 0, 0> yzxx; ::metal::emu_detail::swz<E, 4, 1, 2, 0, 1> yzxy; ::metal::emu_detail::swz<E, 4, 1, 2, 0, 2> yzxz; ::metal::emu_detail::swz<E, 4, 1, 2, 0, 3> yzxw; \
  ::metal::emu_detail::swz<E, 4, 1, 2, 1, 0> yzyx; ::metal::emu_detail::swz<E, 4, 1, 2, 1, 1> yzyy; ::metal::emu_detail::swz<E, 4, 1, 2, 1, 2> yzyz; ::metal::emu_detail::swz<E, 4, 1, 2, 1, 3> yzyw; \
  ::metal::emu_detail::swz<E, 4, 1, 2, 2, 0> yzzx; ::metal::emu_detail::swz<E, 4, 1, 2, 2, 1> yzzy; ::metal::emu_detail::swz<E, 4, 1, 2, 2, 2> yzzz; ::metal::emu_detail::swz<E, 4, 1, 2, 2, 3> yzzw; \
  ::metal::emu_detail::swz<E, 4, 1, 2, 3, 0> yzwx; ::metal::emu_detail::swz<E, 4, 1, 2, 3, 1> yzwy; ::metal::emu_detail::swz<E, 4, 1, 2, 3, 2> yzwz; ::metal::emu_detail::swz<E, 4, 1, 2, 3, 3> yzww; \
  ::metal::emu_detail::swz<E, 4, 1, 3, 0, 0> ywxx; ::metal::emu_detail::swz<E, 4, 1, 3, 0, 1> ywxy; ::metal::emu_detail::swz<E, 4, 1, 3, 0, 2> ywxz; ::metal::emu_detail::swz<E, 4, 1, 3, 0, 3> ywxw; \
  ::metal::emu_detail::swz<E, 4, 1, 3, 1, 0> ywyx; ::metal::emu_detail::swz<E, 4, 1, 3, 1, 1> ywyy; ::metal::emu_detail::swz<E, 4, 1, 3, 1, 2> ywyz; ::metal::emu_detail::swz<E, 4, 1, 3, 1, 3> ywyw; \
  ::metal::emu_detail::swz<E, 4, 1, 3, 2, 0> ywzx; ::metal::emu_detail::swz<E, 4, 1, 3, 2, 1> ywzy; ::metal::emu_detail::swz<E, 4, 1, 3, 2, 2> ywzz; ::metal::emu_detail::swz<E, 4, 1, 3, 2, 3> ywzw; \
  ::metal::emu_detail::swz<E, 4, 1, 3, 3, 0> ywwx; ::metal::emu_detail::swz<E, 4, 1, 3, 3, 1> ywwy; ::metal::emu_detail::swz<E, 4, 1, 3, 3, 2> ywwz; ::metal::emu_detail::swz<E, 4, 1, 3, 3, 3> ywww; \
  ::metal::emu_detail::swz<E, 4, 2, 0, 0, 0> zxxx; ::metal::emu_detail::swz<E, 4, 2, 0, 0, 1> zxxy; ::metal::emu_detail::swz<E, 4, 2, 0, 0, 2> zxxz; ::metal::emu_detail::swz<E, 4, 2, 0, 0, 3> zxxw; \
  ::metal::emu_detail::swz<E, 4, 2, 0, 1, 0> zxyx; ::metal::emu_detail::swz<E, 4, 2, 0, 1, 1> zxyy; ::metal::emu_detail::swz<E, 4, 2, 0, 1, 2> zxyz; ::metal::emu_detail::swz<E, 4, 2, 0, 1, 3> zxyw; \
  ::metal::emu_detail::swz<E, 4, 2, 0, 2, 0> zxzx; ::metal::emu_detail::swz<E, 4, 2, 0, 2, 1> zxzy; ::metal::emu_detail::swz<E, 4, 2, 0, 2, 2> zxzz; ::metal::emu_detail::swz<E, 4, 2, 0, 2, 3> zxzw; \
  ::metal::emu_detail::swz<E, 4, 2, 0, 3, 0> zxwx; ::metal::emu_detail::swz<E, 4, 2, 0, 3, 1> zxwy; ::metal::emu_detail::swz<E, 4, 2, 0, 3, 2> zxwz; ::metal::emu_detail::swz<E, 4, 2, 0, 3, 3> zxww; \
  ::metal::emu_detail::swz<E, 4, 2, 1, 0, 0> zyxx; ::metal::emu_detail::swz<E, 4, 2, 1, 0, 1> zyxy; ::metal::emu_detail::swz<E, 4, 2, 1, 0, 2> zyxz; ::metal::emu_detail::swz<E, 4, 2, 1, 0, 3> zyxw; \
  ::metal::emu_detail::swz<E, 4, 2, 1, 1, 0> zyyx; ::metal::emu_detail::swz<E, 4, 2, 1, 1, 1> zyyy; ::metal::emu_detail::swz<E, 4, 2, 1, 1, 2> zyyz; ::metal::emu_detail::swz<E, 4, 2, 1, 1, 3> zyyw; \
  ::metal::emu_detail::swz<E, 4, 2, 1, 2, 0> zyzx; ::metal::emu_detail::swz<E, 4, 2, 1, 2, 1> zyzy; ::metal::emu_detail::swz<E, 4, 2, 1, 2, 2> zyzz; ::metal::emu_detail::swz<E, 4, 2, 1, 2, 3> zyzw; \
  ::metal::emu_detail::swz<E, 4, 2, 1, 3, 0> zywx; ::metal::emu_detail::swz<E, 4, 2, 1, 3, 1> zywy; ::metal::emu_detail::swz<E, 4, 2, 1, 3, 2> zywz; ::metal::emu_detail::swz<E, 4, 2, 1, 3, 3> zyww; \
  ::metal::emu_detail::swz<E, 4, 2, 2, 0, 0> zzxx; ::metal::emu_detail::swz<E, 4, 2, 2, 0, 1> zzxy; ::metal::emu_detail::swz<E, 4, 2, 2, 0, 2> zzxz; ::metal::emu_detail::swz<E, 4, 2, 2, 0, 3> zzxw; \
  ::metal::emu_detail::swz<E, 4, 2, 2, 1, 0> zzyx; ::metal::emu_detail::swz<E, 4, 2, 2, 1, 1> zzyy; ::metal::emu_detail::swz<E, 4, 2, 2, 1, 2> zzyz; ::metal::emu_detail::swz<E, 4, 2, 2, 1, 3> zzyw; \
  ::metal::emu_detail::swz<E, 4, 2, 2, 2, 0> zzzx; ::metal::emu_detail::swz<E, 4, 2, 2, 2, 1> zzzy; ::metal::emu_detail::swz<E, 4, 2, 2, 2, 2> zzzz; ::metal::emu_detail::swz<E, 4, 2, 2, 2, 3> zzzw; \
  ::metal::emu_detail::swz<E, 4, 2, 2, 3, 0> zzwx; ::metal::emu_detail::swz<E, 4, 2, 2, 3, 1> zzwy; ::metal::emu_detail::swz<E, 4, 2, 2, 3, 2> zzwz; ::metal::emu_detail::swz<E, 4, 2, 2, 3, 3> zzww; \
  ::metal::emu_detail::swz<E, 4, 2, 3, 0, 0> zwxx; ::metal::emu_detail::swz<E, 4, 2, 3, 0, 1> zwxy; ::metal::emu_detail::swz<E, 4, 2, 3, 0, 2> zwxz; ::metal::emu_detail::swz<E, 4, 2, 3, 0, 3> zwxw; \
  ::metal::emu_detail::swz<E, 4, 2, 3, 1, 0> zwyx; ::metal::emu_detail::swz<E, 4, 2, 3, 1, 1> zwyy; ::metal::emu_detail::swz<E, 4, 2, 3, 1, 2> zwyz; ::metal::emu_detail::swz<E, 4, 2, 3, 1, 3> zwyw; \
  ::metal::emu_detail::swz<E, 4, 2, 3, 2, 0> zwzx; ::metal::emu_detail::swz<E, 4, 2, 3, 2, 1> zwzy; ::metal::emu_detail::swz<E, 4, 2, 3, 2, 2> zwzz; ::metal::emu_detail::swz<E, 4, 2, 3, 2, 3> zwzw; \
  ::metal::emu_detail::swz<E, 4, 2, 3, 3, 0> zwwx; ::metal::emu_detail::swz<E, 4, 2, 3, 3, 1> zwwy; ::metal::emu_detail::swz<E, 4, 2, 3, 3, 2> zwwz; ::metal::emu_detail::swz<E, 4, 2, 3, 3, 3> zwww; \
  ::metal::emu_detail::swz<E, 4, 3, 0, 0, 0> wxxx; ::metal::emu_detail::swz<E, 4, 3, 0, 0, 1> wxxy; ::metal::emu_detail::swz<E, 4, 3, 0, 0, 2> wxxz; ::metal::emu_detail::swz<E, 4, 3, 0, 0, 3> wxxw; \
  ::metal::emu_detail::swz<E, 4, 3, 0, 1, 0> wxyx; ::metal::emu_detail::swz<E, 4, 3, 0, 1, 1> wxyy; ::metal::emu_detail::swz<E, 4, 3, 0, 1, 2> wxyz; ::metal::emu_detail::swz<E, 4, 3, 0, 1, 3> wxyw; \
  ::metal::emu_detail::swz<E, 4, 3, 0, 2, 0> wxzx; ::metal::emu_detail::swz<E, 4, 3, 0, 2, 1> wxzy; ::metal::emu_detail::swz<E, 4, 3, 0, 2, 2> wxzz; ::metal::emu_detail::swz<E, 4, 3, 0, 2, 3> wxzw; \
  ::metal::emu_detail::swz<E, 4, 3, 0, 3, 0> wxwx; ::metal::emu_detail::swz<E, 4, 3, 0, 3, 1> wxwy; ::metal::emu_detail::swz<E, 4, 3, 0, 3, 2> wxwz; ::metal::emu_detail::swz<E, 4, 3, 0, 3, 3> wxww; \
  ::metal::emu_detail::swz<E, 4, 3, 1, 0, 0> wyxx; ::metal::emu_detail::swz<E, 4, 3, 1, 0, 1> wyxy; ::metal::emu_detail::swz<E, 4, 3, 1, 0, 2> wyxz; ::metal::emu_detail::swz<E, 4, 3, 1, 0, 3> wyxw; \
  ::metal::emu_detail::swz<E, 4, 3, 1, 1, 0> wyyx; ::metal::emu_detail::swz<E, 4, 3, 1, 1, 1> wyyy; ::metal::emu_detail::swz<E, 4, 3, 1, 1, 2> wyyz; ::metal::emu_detail::swz<E, 4, 3, 1, 1, 3> wyyw; \
  ::metal::emu_detail::swz<E, 4, 3, 1, 2, 0> wyzx; ::metal::emu_detail::swz<E, 4, 3, 1, 2, 1> wyzy; ::metal::emu_detail::swz<E, 4, 3, 1, 2, 2> wyzz; ::metal::emu_detail::swz<E, 4, 3, 1, 2, 3> wyzw; \
  ::metal::emu_detail::swz<E, 4, 3, 1, 3, 0> wywx; ::metal::emu_detail::swz<E, 4, 3, 1, 3, 1> wywy; ::metal::emu_detail::swz<E, 4, 3, 1, 3, 2> wywz; ::metal::emu_detail::swz<E, 4, 3, 1, 3, 3> wyww; \
  ::metal::emu_detail::swz<E, 4, 3, 2, 0, 0> wzxx; ::metal::emu_detail::swz<E, 4, 3, 2, 0, 1> wzxy; ::metal::emu_detail::swz<E, 4, 3, 2, 0, 2> wzxz; ::metal::emu_detail::swz<E, 4, 3, 2, 0, 3> wzxw; \
  ::metal::emu_detail::swz<E, 4, 3, 2, 1, 0> wzyx; ::metal::emu_detail::swz<E, 4, 3, 2, 1, 1> wzyy; ::metal::emu_detail::swz<E, 4, 3, 2, 1, 2> wzyz; ::metal::emu_detail::swz<E, 4, 3, 2, 1, 3> wzyw; \
  ::metal::emu_detail::swz<E, 4, 3, 2, 2, 0> wzzx; ::metal::emu_detail::swz<E, 4, 3, 2, 2, 1> wzzy; ::metal::emu_detail::swz<E, 4, 3, 2, 2, 2> wzzz; ::metal::emu_detail::swz<E, 4, 3, 2, 2, 3> wzzw; \
  ::metal::emu_detail::swz<E, 4, 3, 2, 3, 0> wzwx; ::metal::emu_detail::swz<E, 4, 3, 2, 3, 1> wzwy; ::metal::emu_detail::swz<E, 4, 3, 2, 3, 2> wzwz; ::metal::emu_detail::swz<E, 4, 3, 2, 3, 3> wzww; \
  ::metal::emu_detail::swz<E, 4, 3, 3, 0, 0> wwxx; ::metal::emu_detail::swz<E, 4, 3, 3, 0, 1> wwxy; ::metal::emu_detail::swz<E, 4, 3, 3, 0, 2> wwxz; ::metal::emu_detail::swz<E, 4, 3, 3, 0, 3> wwxw; \
  ::metal::emu_detail::swz<E, 4, 3, 3, 1, 0> wwyx; ::metal::emu_detail::swz<E, 4, 3, 3, 1, 1> wwyy; ::metal::emu_detail::swz<E, 4, 3, 3, 1, 2> wwyz; ::metal::emu_detail::swz<E, 4, 3, 3, 1, 3> wwyw; \
  ::metal::emu_detail::swz<E, 4, 3, 3, 2, 0> wwzx; ::metal::emu_detail::swz<E, 4, 3, 3, 2, 1> wwzy; ::metal::emu_detail::swz<E, 4, 3, 3, 2, 2> wwzz; ::metal::emu_detail::swz<E, 4, 3, 3, 2, 3> wwzw; \
  ::metal::emu_detail::swz<E, 4, 3, 3, 3, 0> wwwx; ::metal::emu_detail::swz<E, 4, 3, 3, 3, 1> wwwy; ::metal::emu_detail::swz<E, 4, 3, 3, 3, 2> wwwz; ::metal::emu_detail::swz<E, 4, 3, 3, 3, 3> wwww; \

