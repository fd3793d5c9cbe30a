//===- cluster.cuh - Thread-block clusters on sm_90 ------------*- CUDA -*-===//
//
// Helpers (kClusterHelpers, after async.cuh): CLUSTERS, GTC_CLUSTER, cluster
// barriers, ranks and remote stores, and the mbarriers they complete on
// (also gemm_wgmma's, for its TMA copies) (sm_90; none below).
//===----------------------------------------------------------------------===//

// Thread-block clusters (sm_90): CLUSTERS is 1 where the architecture has
// them, and GTC_CLUSTER, placed after __launch_bounds__, makes clusters of
// S CTAs (the kernel's constant). CTAs push data into each other's shared
// memory with st.async, each store completing on the receiving CTA's
// mbarrier, which expects the bytes that will arrive: the receiver waits
// for its data alone, and no cluster-wide release (a GPU-wide memory
// barrier on sm_90) is needed. Protocol, every thread of every CTA:
//   push_begin(bar, bytes)   first thing: thread 0 sets up this CTA's
//                            mbarrier for `bytes`, then the CTA arrives on
//                            the cluster barrier (it has started);
//   push_ready()             before the first push: waits for every CTA of
//                            the cluster to have started;
//   push(p, bar, rank, ...)  stores into CTA `rank`'s copy of p;
//   push_wait(bar)           waits until this CTA's bytes have arrived.
#if __CUDA_ARCH__ >= 900
#define CLUSTERS 1
// mbarriers at shared addresses: made for `count` arrivals; an arrival that
// also expects `bytes` of asynchronous copies (st.async, TMA); an arrival;
// a wait for the phase of parity `parity` to complete.
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// p's address in the shared memory of the cluster's CTA `rank`.
__device__ __forceinline__ u32 remote(const void *p, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
  return r;
}
__device__ __forceinline__ void push_begin(unsigned long long *bar, u32 bytes) {
  if (threadIdx.x == 0) {
    mbar_init(smem_u32(bar), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    mbar_expect_tx(smem_u32(bar), bytes);
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void push_ready() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
__device__ __forceinline__ void push(float *p, unsigned long long *bar, u32 rank,
                                     float x, float y) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
               :: "r"(remote(p, rank)), "f"(x), "f"(y), "r"(remote(bar, rank)) : "memory");
}
__device__ __forceinline__ void push(float *p, unsigned long long *bar, u32 rank,
                                     float x, float y, float z, float w) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(remote(p, rank)), "f"(x), "f"(y), "f"(z), "f"(w),
                  "r"(remote(bar, rank)) : "memory");
}
__device__ __forceinline__ void push_wait(unsigned long long *bar) {
  mbar_wait(smem_u32(bar), 0);
}
#define GTC_CLUSTER __cluster_dims__(S, 1, 1)
#else
#define CLUSTERS 0
#define GTC_CLUSTER
#endif

