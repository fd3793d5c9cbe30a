// A/B timing of variants of one Hopper attention kernel (flash_*_wgmma.cuh,
// heads of 64, bf16) as standalone cubins, without gtc: every cubin gets the
// same pseudo-random operands, its outputs are compared bit for bit with the
// first cubin's, and each is timed (CUDA events over 5 launches, 30 rounds
// alternating the cubins, median and minimum a launch). q, k and v are packed
// per position as gt-pack-projections leaves them ([B, T, (H + 2 HKV) 64]:
// q's heads, then k's, then v's), dy and y are [B, T, H 64], lse and deltas
// [B, H, T] f32, as the kernels take them.
//
// Make the cubins from a model of that shape, e.g. llama124m-t4096:
//   sed 's/  let V = 32000, T = 1024,/  let V = 32000, T = 4096,/' examples/llama.gt > l.gt
//   gtc run l.gt --emit=cuda --precision bf16 --batch 4 > l.cu
// cut one "// launch ... (sm_90a)" block out of l.cu into base.cu, edit copies
// of it, then `nvcc -arch=sm_90a -cubin -o base.cubin base.cu` for each (add
// -Xptxas -v for registers and spills). On the GPU machine:
//   g++ -O2 -I/usr/local/cuda/include attention_ab.cpp -lcuda -o ab
//   ./ab dkdv 4 4096 12 4 base.cubin variant.cubin ...   (MODE B T H HKV CUBIN...)
// MODE fwd launches gtc_kernel(qkv, y, lse), dq (dy, qkv, dqkv, y, lse,
// deltas) and dkdv (dy, qkv, dqkv, lse, deltas), each followed by six
// tensor maps (q, k, v, dy at boxes of 64 rows in the 128-byte swizzle, lse
// and deltas at boxes of 64) that a variant may read with
// cp.async.bulk.tensor and the kernels of gtc ignore. AB_SHARED=BYTES sets
// the dynamic shared memory (default 51232). Figures:
// test/bench/NOTES.md, fortieth session.
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    CUresult r = (x);                                                          \
    if (r != CUDA_SUCCESS) {                                                   \
      const char *s;                                                           \
      cuGetErrorString(r, &s);                                                 \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, s);                \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

static std::vector<char> readFile(const char *path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::printf("cannot read %s\n", path);
    std::exit(1);
  }
  return {std::istreambuf_iterator<char>(f), {}};
}
static unsigned short bf16(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return static_cast<unsigned short>(u >> 16);
}

int main(int argc, char **argv) {
  if (argc < 7) {
    std::printf("usage: %s fwd|dq|dkdv B T H HKV CUBIN...\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int B = std::atoi(argv[2]), T = std::atoi(argv[3]), H = std::atoi(argv[4]),
            HKV = std::atoi(argv[5]), HD = 64, D = H * HD, ROW = (H + 2 * HKV) * HD,
            STEP = 64;
  // Dynamic shared memory for every cubin: gtc's Hopper kernels take at most
  // 51200 bytes (4 blocks an SM fit 51232); AB_SHARED for variants that need
  // more.
  const char *sharedEnv = std::getenv("AB_SHARED");
  const int shared = sharedEnv ? std::atoi(sharedEnv) : 51232;
  if (mode != "fwd" && mode != "dq" && mode != "dkdv") {
    std::printf("unknown mode %s: fwd, dq or dkdv\n", mode.c_str());
    return 2;
  }
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  const size_t nqkv = size_t(B) * T * ROW, ny = size_t(B) * T * D, nl = size_t(B) * H * T;
  std::vector<unsigned short> hq(nqkv), hdy(ny), hy(ny);
  std::vector<float> hl(nl), hd(nl);
  std::srand(1);
  auto u = [] { return std::rand() / float(RAND_MAX) * 2 - 1; };
  for (auto &x : hq)
    x = bf16(u());
  for (auto &x : hdy)
    x = bf16(u() * 0.1f);
  for (auto &x : hy)
    x = bf16(u());
  for (auto &x : hl) // log-sum-exps near a row of T scores' (finite p)
    x = 6.f + u();
  for (auto &x : hd)
    x = u() * 0.1f;
  CUdeviceptr q, dy, y, l, d, maps;
  CK(cuMemAlloc(&q, nqkv * 2));
  CK(cuMemAlloc(&dy, ny * 2));
  CK(cuMemAlloc(&y, ny * 2));
  CK(cuMemAlloc(&l, nl * 4));
  CK(cuMemAlloc(&d, nl * 4));
  CK(cuMemAlloc(&maps, 6 * 128));
  CK(cuMemcpyHtoD(q, hq.data(), nqkv * 2));
  CK(cuMemcpyHtoD(dy, hdy.data(), ny * 2));
  CK(cuMemcpyHtoD(y, hy.data(), ny * 2));
  CK(cuMemcpyHtoD(l, hl.data(), nl * 4));
  CK(cuMemcpyHtoD(d, hd.data(), nl * 4));

  // One head's 64 columns of rows of 64 positions: {HD, heads, T, B}, zeros
  // past T; lse and deltas as {T, B H} in boxes of 64.
  CUtensorMap m[6] = {}; // lse's and deltas' stay zero when T % 4 != 0
  auto heads = [&](CUtensorMap *map, CUdeviceptr base, int n, long rowElems) {
    cuuint64_t dims[4] = {cuuint64_t(HD), cuuint64_t(n), cuuint64_t(T), cuuint64_t(B)};
    cuuint64_t strides[3] = {cuuint64_t(HD) * 2, cuuint64_t(rowElems) * 2,
                             cuuint64_t(T) * rowElems * 2};
    cuuint32_t box[4] = {cuuint32_t(HD), 1, cuuint32_t(STEP), 1}, step[4] = {1, 1, 1, 1};
    CK(cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, (void *)base, dims,
                              strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  };
  auto rows = [&](CUtensorMap *map, CUdeviceptr base) {
    cuuint64_t dims[2] = {cuuint64_t(T), cuuint64_t(B) * H}, strides[1] = {cuuint64_t(T) * 4};
    cuuint32_t box[2] = {cuuint32_t(STEP), 1}, step[2] = {1, 1};
    CK(cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)base, dims,
                              strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  };
  heads(&m[0], q, H, ROW);
  heads(&m[1], q + size_t(H) * HD * 2, HKV, ROW);
  heads(&m[2], q + size_t(H + HKV) * HD * 2, HKV, ROW);
  heads(&m[3], dy, H, D);
  if (T % 4 == 0) { // a row stride of a multiple of 16 bytes
    rows(&m[4], l);
    rows(&m[5], d);
  }
  CK(cuMemcpyHtoD(maps, m, sizeof m));
  CUdeviceptr mp[6];
  for (int i = 0; i < 6; ++i)
    mp[i] = maps + 128 * i;

  const int tiles = (T + 63) / 64, grid = (mode == "dkdv" ? B * HKV : B * H) * tiles;
  const size_t n16 = mode == "fwd" ? ny : nqkv; // the 16-bit output: y or dqkv
  struct Cubin {
    const char *file;
    CUfunction f;
    CUdeviceptr out16, out32; // y or dqkv; lse (fwd) or deltas (dq)
  };
  std::vector<Cubin> cs;
  for (int i = 6; i < argc; ++i) {
    Cubin c{argv[i], nullptr, 0, 0};
    std::vector<char> image = readFile(c.file);
    CUmodule mod;
    CK(cuModuleLoadData(&mod, image.data()));
    CK(cuModuleGetFunction(&c.f, mod, "gtc_kernel"));
    CK(cuFuncSetAttribute(c.f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared));
    CK(cuMemAlloc(&c.out16, n16 * 2));
    CK(cuMemsetD8(c.out16, 0, n16 * 2));
    CK(cuMemAlloc(&c.out32, nl * 4));
    CK(cuMemsetD8(c.out32, 0, nl * 4));
    cs.push_back(c);
  }
  auto launch = [&](Cubin &c) {
    std::vector<void *> a;
    if (mode == "fwd")
      a = {&q, &c.out16, &c.out32};
    else if (mode == "dq")
      a = {&dy, &q, &c.out16, &y, &l, &c.out32};
    else
      a = {&dy, &q, &c.out16, &l, &d};
    for (CUdeviceptr &p : mp)
      a.push_back(&p);
    CK(cuLaunchKernel(c.f, grid, 1, 1, 128, 1, 1, shared, 0, a.data(), nullptr));
  };
  for (int w = 0; w < 3; ++w)
    for (Cubin &c : cs)
      launch(c);
  CK(cuCtxSynchronize());

  std::vector<unsigned short> a16(n16), b16(n16);
  std::vector<unsigned> a32(nl), b32(nl);
  CK(cuMemcpyDtoH(a16.data(), cs[0].out16, n16 * 2));
  CK(cuMemcpyDtoH(a32.data(), cs[0].out32, nl * 4));
  for (size_t k = 1; k < cs.size(); ++k) {
    CK(cuMemcpyDtoH(b16.data(), cs[k].out16, n16 * 2));
    CK(cuMemcpyDtoH(b32.data(), cs[k].out32, nl * 4));
    size_t d16 = 0, d32 = 0;
    for (size_t i = 0; i < n16; ++i)
      d16 += a16[i] != b16[i];
    for (size_t i = 0; i < nl; ++i)
      d32 += a32[i] != b32[i];
    std::printf("%s: %zu of %zu 16-bit and %zu of %zu f32 outputs differ from %s\n",
                cs[k].file, d16, n16, d32, nl, cs[0].file);
  }
  CUevent e0, e1;
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  std::vector<std::vector<float>> us(cs.size());
  for (int r = 0; r < 30; ++r)
    for (size_t k = 0; k < cs.size(); ++k) {
      CK(cuEventRecord(e0, 0));
      for (int i = 0; i < 5; ++i)
        launch(cs[k]);
      CK(cuEventRecord(e1, 0));
      CK(cuEventSynchronize(e1));
      float ms;
      CK(cuEventElapsedTime(&ms, e0, e1));
      us[k].push_back(ms * 1000 / 5);
    }
  for (size_t k = 0; k < cs.size(); ++k) {
    std::sort(us[k].begin(), us[k].end());
    std::printf("%s %s: median %.1f us, min %.1f\n", mode.c_str(), cs[k].file, us[k][15],
                us[k][0]);
  }
  return 0;
}
