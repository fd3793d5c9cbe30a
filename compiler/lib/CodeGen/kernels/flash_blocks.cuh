//===- flash_blocks.cuh - The head and tile of a block ---------*- CUDA -*-===//
//
// The flash kernels' blocks (after NB, the tiles a head, and the constant
// GROUP): a block takes one tile of ROWS rows of one (batch, head) pair
// (key head in dkdv). Blocks go by groups of GROUP / NB pairs, all of one
// group's tiles before the next group's, so that what the tiles of a pair
// share (the K and V of the forward and dq, the Q and dy of dkdv) can stay
// in L2 while the group runs. GROUP is about one wave of blocks (132 SMs
// of 4): a group's pairs then share about 8 MB (heads of 64), whatever T
// is. With every pair's tile i running together instead, a wave of a large
// model covered every pair (GPT-2 1558M: 400 pairs, 100 MB of K and V,
// twice an H100's L2), and its step took 353.0 ms against 339.9
// (test/bench/NOTES.md, forty-fourth session). Within a group the longest
// causal tiles go first (tile 0), so that a short one is last to finish.
//===----------------------------------------------------------------------===//

__device__ __forceinline__ void flash_block(int pairs, int &pair, int &tile) {
  constexpr int GP = GROUP / NB > 1 ? GROUP / NB : 1;  // pairs a group
  const int group = blockIdx.x / (GP * NB), in = blockIdx.x - group * GP * NB;
  const int n = min(GP, pairs - group * GP);  // the last group may have fewer
  pair = group * GP + in % n;
  tile = in / n;
}
