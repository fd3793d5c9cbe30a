//===- column_tiles.cuh - Column sums of a tile of rows --------*- CUDA -*-===//
//
// Body of Emitter::columnTiles (ReduceKernels.cpp): column sums of a tile
// of rows, WARPS warps a block, VEC columns a lane, into the workspace part.
// Buffers: x, part (workspace). Constants: A, R, K, VEC, WARPS, TILES, CHUNKS, ROWS; xt,
// xpack.
//===----------------------------------------------------------------------===//
  __shared__ float sums[WARPS][32 * VEC + 1];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const i64 c = blockIdx.x % CHUNKS, t = blockIdx.x / CHUNKS % TILES,
            a = blockIdx.x / (CHUNKS * TILES);
  const i64 col = (t * 32 + lane) * VEC;
  float s[VEC] = {};
  if (col < K) {
    const xt *src = x + a * R * K + col;
    const i64 end = min(R, (c + 1) * CHUNK);
#pragma unroll 4
    for (i64 row = c * CHUNK + w; row < end; row += WARPS) {
      const xpack p = *reinterpret_cast<const xpack *>(src + row * K);
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        s[e] += (float)p.e[e];
    }
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    sums[w][lane * VEC + e] = s[e];
  __syncthreads();
  for (int j = threadIdx.x; j < 32 * VEC; j += blockDim.x) {
    const i64 k = t * 32 * VEC + j;
    if (k >= K)
      continue;
    double total = 0.0;
    for (int v = 0; v < WARPS; ++v)
      total += (double)sums[v][j];
    part[(c * A + a) * K + k] = total;
  }

