//===- prelude.cuh - Types and helpers every kernel has --------*- CUDA -*-===//
//
// First in every kernel: i64, GTC_INF and GTC_NAN, and the 16-bit storage
// types bf16_t and f16_t (no CUDA headers under NVRTC).
//===----------------------------------------------------------------------===//
typedef long long i64;
#define GTC_INF __int_as_float(0x7f800000)
#define GTC_NAN __int_as_float(0x7fffffff)
// 16-bit storage types (no CUDA headers under NVRTC): read as float, assigned
// from float with round-to-nearest-even (PTX cvt.rn; sm_80 and newer).
struct bf16_t {
  unsigned short u;
  __device__ __forceinline__ operator float() const {
    return __uint_as_float((unsigned)u << 16);
  }
  __device__ __forceinline__ bf16_t &operator=(float f) {
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(u) : "f"(f));
    return *this;
  }
};
struct f16_t {
  unsigned short u;
  __device__ __forceinline__ operator float() const {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(u));
    return f;
  }
  __device__ __forceinline__ f16_t &operator=(float f) {
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(u) : "f"(f));
    return *this;
  }
};
struct __align__(8) bf16_t4 { bf16_t x, y, z, w; };
struct __align__(8) f16_t4 { f16_t x, y, z, w; };

