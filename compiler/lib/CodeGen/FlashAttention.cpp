//===- FlashAttention.cpp - Tensor-core attention and its gradient --------===//
//
// Attention on bf16/fp16 q, k, v with head size 64 or 128, on tensor cores
// (mma.sync m16n8k16, fp32 accumulation), after FlashAttention-2 (Dao,
// 2023); f32 q, k, v at --precision tf32 take the same kernels on
// m16n8k8 tf32 (flash_mma_tf32.cuh: two MMAs a k step of 16): the T x T scores
// never leave registers; a warp owns 16 rows of a tile and keeps its softmax
// state (row max and sum) while key tiles stream through shared memory
// (cp.async, two stages). The forward pass also stores each query's
// log-sum-exp; the gradient reuses it in two launches, both deterministic (no
// atomics; every element of dqkv is written once by the thread that owns it):
//   dq:    per query tile, delta = dy . y (to the workspace, for dkdv) and
//          dq = scale * sum over keys of ds k, ds = p (dp - delta);
//   dkdv:  per key tile, dv = sum over queries of p dy, dk = scale * ds^T q,
//          the queries of every head that reads the key head (grouped-query
//          attention: K and V are read in place, never repeated).
// In an "attention_grad" region both also turn dq and dk back by inverse
// ropes, and over a packed dqkv may sum its columns (a projection's bias
// gradient) as they store it, by 64-row chunks into the workspace, which a
// third launch adds in order (flash_rope.cuh).
// Each 16-bit launch also carries a variant for Hopper (sm_90a, CudaLaunch::
// Variant), the same three kernels on warpgroup MMA (wgmma): blocks of
// whole warpgroups (WgmmaTiles), tiles in shared memory in the swizzled
// layout wgmma reads (flash_wgmma.cuh), the executor choosing by the
// device. Other dtypes and head sizes take the CUDA-core kernels of
// AttentionKernels.cpp.
//===----------------------------------------------------------------------===//

#include "EmitterImpl.h"

using namespace gtc;
using namespace gtc::rt;
using namespace gtc::codegen::detail;

std::string gtc::codegen::detail::mmaTyped(std::string text, bool bf16) {
  for (size_t at; (at = text.find("MMA_T")) != std::string::npos;)
    text.replace(at, 5, bf16 ? "bf16" : "f16");
  return text;
}

namespace {

/// GROUP, the blocks of a group of (batch, head) pairs, and flash_block,
/// which gives a block its pair and tile (flash_blocks.cuh). Measured on an
/// H100 (test/bench/NOTES.md, forty-fourth session), GPT-2 step times against
/// every pair's tile i together: 1558M 353.0 -> 339.9 ms (256: 340.1, 1024:
/// 341.2), 355M 83.6 -> 82.5, 124M 31.0 -> 30.75; llama124m unchanged.
std::string groupConsts() {
  return "constexpr int GROUP = 512;  // blocks a group of pairs: about a "
         "wave\n" +
         std::string(cuh::flash_blocks);
}

/// A flash kernel's tiles: its block of 4 warps owns ROWS = 64 MW rows
/// (queries in the forward and dq, keys in dkdv), a warp MW atoms of 16, and
/// streams tiles of STEP rows of the other side through shared memory.
/// Two atoms a warp (heads of 64) let each B fragment loaded from shared
/// memory serve two MMAs; heads of 128 take one, their accumulators being
/// twice as wide. dq keeps Q, dy and dq in registers, so its key tiles are
/// short; dkdv keeps dk and dv. The same tiles serve f32 at tf32, whose
/// fragments take twice the registers: with one atom a warp GPT-2 124M's
/// step took 76.6 ms, with two 72.1 (H200, test/bench/NOTES.md, thirtieth
/// session).
struct FlashTiles {
  int64_t mw, step;
  int64_t rows() const { return 64 * mw; }
  std::string consts() const {
    return "constexpr int MW = " + str(mw) +
           ", ROWS = 64 * MW, STEP = " + str(step) +
           ";  // 16-row atoms a warp, rows a block, streamed tile rows\n"
           "constexpr int NB = (T + ROWS - 1) / ROWS;  // blocks a head\n" +
           groupConsts();
  }
};
enum class FlashKernel { Forward, Dq, Dkdv };
FlashTiles flashTiles(FlashKernel kernel, int64_t hd) {
  int64_t mw = hd == 64 ? 2 : 1;
  switch (kernel) {
  case FlashKernel::Forward:
    return {mw, 64};
  case FlashKernel::Dq:
    return {mw, 32};
  case FlashKernel::Dkdv:
    return {mw, 32};
  }
  return {1, 32};
}

/// The Hopper kernels' tiles (flash_*_wgmma.cuh): a block of WGS
/// warpgroups owns ROWS = 64 WGS rows, 64 a warpgroup (wgmma's M), and
/// streams tiles of STEP rows of the other side; `minBlocks` blocks an SM.
/// Measured standalone on an H200 (test/bench/NOTES.md, twenty-seventh
/// session): the gradient's blocks take one warpgroup, so that blocks on an
/// SM are not in step (a block's warpgroups meet at every tile's barrier,
/// and all wait for their MMAs, or all for the softmax, at once): dq 163 ->
/// 116 us, dkdv 180 -> 160 us against two warpgroups; the forward pass is
/// as fast either way (93.6, 92.4 us). With heads of 64, registers bounded
/// for 4 dq blocks an SM (128) and 3 dkdv blocks (168) took them to 107
/// and 139 us, with nothing spilled. The forward is software-pipelined
/// (flash_forward_wgmma.cuh): with heads of 64 on blocks of one warpgroup
/// and key tiles of 64, 4 an SM, it took 93.2-93.4 us against 99.5-99.8 for
/// the unpipelined kernel's 2 warpgroups and tiles of 128, 2 an SM (GQA T
/// 1024 B 16; MHA 95.3-95.7 against 100.9; level at T 4096: 277.7-280.0
/// against 279.9); on 2 warpgroups and tiles of 128 it needs 176 registers,
/// so 1 block an SM, and took 131.6 us. Heads of 128 keep those tiles, 1 an
/// SM as before, and gain 2-3% (thirty-eighth session). These times predate
/// the thirty-ninth session's cheaper tile loads and descriptors, which made
/// every kernel 3-14% faster at the same tiles.
struct WgmmaTiles {
  int64_t wgs, step;
  int minBlocks;
  int64_t rows() const { return 64 * wgs; }
  int64_t threads() const { return 128 * wgs; }
  /// "one block of N warpgroups per ROWS", for the launches' comments.
  std::string blocks() const {
    return "one block of " + str(wgs) +
           (wgs == 1 ? " warpgroup" : " warpgroups") + " per " + str(rows());
  }
  std::string consts(bool bf16) const {
    return "constexpr int ROWS = " + str(rows()) + ", STEP = " + str(step) +
           ", THREADS = " + str(threads()) +
           ";  // rows a block, streamed tile rows, threads\n"
           "constexpr int NB = (T + ROWS - 1) / ROWS;  // blocks a head\n" +
           groupConsts() + mmaTyped(cuh::wgmma, bf16) + "\n" +
           cuh::flash_wgmma;
  }
};
WgmmaTiles wgmmaTiles(FlashKernel kernel, int64_t hd) {
  switch (kernel) {
  case FlashKernel::Forward:
    return hd == 64 ? WgmmaTiles{1, 64, 4} : WgmmaTiles{2, 128, 1};
  case FlashKernel::Dq:
    return {1, 64, hd == 64 ? 4 : 2};
  case FlashKernel::Dkdv:
    return {1, 64, hd == 64 ? 3 : 2};
  }
  return {1, 64, 1};
}

} // namespace

bool Emitter::tensorCoreAttention(int64_t hd, std::initializer_list<int> ids) {
  DType t = plan.buffers[*ids.begin()].dtype;
  bool tf32 = t == DType::F32 && plan.config.precision == Precision::Tf32;
  if ((t != DType::BF16 && t != DType::F16 && !tf32) || (hd != 64 && hd != 128))
    return false;
  for (int id : ids)
    if (plan.buffers[id].dtype != t)
      return false;
  return true;
}

DType Emitter::flashType(const AttentionLayout &a) {
  return plan.buffers[a.q].dtype;
}

/// A tile row's elements, padded (16-bit rows: conflict-free ldmatrix; f32
/// rows: conflict-free ldmatrix and ld_b).
static int64_t rowStride(const AttentionLayout &a, DType t) {
  return a.hd + (t == DType::F32 ? 4 : 8);
}

std::string Emitter::flashConsts(const AttentionLayout &a) {
  double scale = 1.0 / std::sqrt(double(a.hd));
  DType t = flashType(a);
  std::string helpers =
      (t == DType::F32 ? std::string(cuh::flash_mma_tf32)
                       : mmaTyped(cuh::flash_mma_16bit, t == DType::BF16)) +
      cuh::flash_mma;
  return "typedef " +
         std::string(t == DType::F32    ? "float"
                     : t == DType::BF16 ? "bf16_t"
                                        : "f16_t") +
         " E;\n" + attentionShapeConsts(a) +
         "constexpr float SCALE = " + flt(static_cast<float>(scale)) +
         ";  // 1 / sqrt(HD)\n" + "constexpr float SCALE2 = " +
         flt(static_cast<float>(scale / std::log(2.0))) +
         ";  // SCALE * log2(e): softmax in base 2\n"
         "constexpr float LOG2E = 1.44269504f, LN2 = 0.693147181f;\n"
         "constexpr int LDS = " +
         str(rowStride(a, t)) + ";  // tile row stride: conflict-free loads\n" +
         helpers;
}

/// The forward pass on tensor cores (see the file comment).
bool Emitter::flashAttention(const AttentionLayout &a) {
  int y = a.y, lse = a.lse;
  DType t = flashType(a);
  int64_t lds = rowStride(a, t), eb = dtypeBytes(t);
  FlashTiles f = flashTiles(FlashKernel::Forward, a.hd);
  int64_t blocks = a.b * a.h * ceilDiv(a.t, f.rows());
  AttnArgs ops = attentionOperands(a, AttnGrad::None);
  ops.args.push_back(out(y, "y"));
  ops.args.push_back(out(lse, "lse"));
  launch("",
         "tensor cores (mma.sync), one block of 4 warps per " + str(f.rows()) +
             " queries of one (batch, head): " + str(blocks) +
             " tiles, online softmax over key tiles of " + str(f.step) +
             "; the rows' log-sum-exp to lse",
         ops.args, kAsyncHelpers, flashConsts(a) + f.consts(),
         ops.pointers + cuh::flash_forward, blocks, 128);
  launches.back().shared = (f.rows() + 4 * f.step) * lds * eb;
  launches.back().tensorCores = true;
  if (t == DType::F32)
    return true;

  // Hopper: the same on warpgroup MMA.
  WgmmaTiles w = wgmmaTiles(FlashKernel::Forward, a.hd);
  int64_t hopperBlocks = a.b * a.h * ceilDiv(a.t, w.rows());
  launch("",
         "warpgroup MMA (wgmma), " + w.blocks() +
             " queries of one (batch, head): " + str(hopperBlocks) +
             " tiles, online softmax over key tiles of " + str(w.step) +
             ", software-pipelined (a tile's S before the last one's P V); "
             "the rows' log-sum-exp to lse",
         ops.args, kAsyncHelpers,
         flashConsts(a) + w.consts(flashType(a) == DType::BF16),
         ops.pointers + cuh::flash_forward_wgmma, hopperBlocks, w.threads(),
         w.minBlocks);
  // Q, two stages of K and three of V, aligned to 1024 bytes.
  launches.back().shared = 1024 + (w.rows() + 5 * w.step) * a.hd * 2;
  asVariant(9, 0, "sm_90a");
  return true;
}

/// gt-fuse's "attention_grad" region: the gradient of attention over
/// rope(q) and rope(k), and the inverse ropes of its dq and dk, which the
/// tensor-core kernels apply as they store dq and dk (flash_rope.cuh): the
/// region's gradient kernel with the ropes' results for dq and dk and their
/// angles as attributes. Over packed heads [B, T, H + 2 Hkv, d] one inverse
/// rope turns dq's and dk's heads back (`rotated` = H + Hkv) and leaves dv.
/// A packed gradient ([B, T, (H + 2 Hkv) d] too) may instead or as well
/// have its columns summed over all rows (a linear's bias gradient), with
/// the cast of the sum: the kernels sum what they store.
bool Emitter::attentionGradRegion() {
  const std::vector<Kernel> &body = k->body;
  auto isOf = [&](size_t i, OpKind op, int of) {
    return i < body.size() && body[i].op == op &&
           body[i].inputs == std::vector<int>{of};
  };
  const Kernel *grad0 = body.empty() ? nullptr : &body[0];
  bool isGrad = grad0 && grad0->op == OpKind::AttentionGrad;
  bool separate = isGrad && grad0->outputs.size() == 3 &&
                  isOf(1, OpKind::Rope, grad0->outputs[0]) &&
                  isOf(2, OpKind::Rope, grad0->outputs[1]);
  bool packed = isGrad && grad0->outputs.size() == 1;
  bool rope = separate || (packed && isOf(1, OpKind::Rope, grad0->outputs[0]));
  size_t next = separate ? 3 : rope ? 2 : 1;
  // The packed gradient as stored, its column sums and their cast.
  int sums = -1;
  if (packed) {
    int stored = body[next - 1].outputs[0];
    if (isOf(next, OpKind::SumTo, stored)) {
      sums = body[next++].outputs[0];
      if (isOf(next, OpKind::Cast, sums))
        sums = body[next++].outputs[0];
    }
  }
  if ((!separate && !packed) || next != body.size() || (!rope && sums < 0))
    return fail("an attention_grad region is an attention gradient and the "
                "inverse ropes of its dq and dk, or of packed heads, and the "
                "column sums of a packed gradient");
  Kernel grad = body[0];
  Attr theta, interleaved;
  theta.kind = Attr::Kind::Float;
  if (rope) {
    grad.outputs[0] = body[1].outputs[0];
    if (separate)
      grad.outputs[1] = body[2].outputs[0];
    theta.f = body[1].floatAttr("theta", 10000.0);
    interleaved.i = body[1].intAttr("interleaved", 0);
    grad.attrs["rope_theta"] = theta;
    grad.attrs["rope_interleaved"] = interleaved;
  }
  const Kernel *region = k;
  k = &grad;
  AttentionLayout a = attentionLayout(plan, grad);
  if (rope && packed && a.error.empty() &&
      body[1].intAttr("rotated", a.h + 2 * a.hkv) != a.h + a.hkv)
    a.error = "the inverse rope of packed heads turns q's and k's heads";
  if (sums >= 0 && a.error.empty() &&
      (shape(sums).size() != 1 || shape(sums)[0] != a.qRow))
    a.error = "the column sums of a packed gradient are a row's";
  bool ok =
      a.error.empty() && (separate || !rope || shape(a.q).size() == 4) &&
      tensorCoreAttention(a.hd, {a.dy, a.y, a.q, a.k, a.v, a.dq, a.dk, a.dv}) &&
      flashType(a) != DType::F32;
  ok = ok ? flashAttentionGrad(a, sums)
          : fail("an attention_grad region needs the tensor-core kernels "
                 "(16-bit q, k and v, heads of 64 or 128): " +
                 (a.error.empty() ? std::string("these are not") : a.error));
  k = region;
  return ok;
}

void Emitter::asVariant(int major, int minor, const std::string &arch) {
  CudaLaunch v = std::move(launches.back());
  launches.pop_back();
  CudaLaunch::Variant variant;
  variant.major = major;
  variant.minor = minor;
  variant.arch = arch;
  variant.what = v.comment.substr(v.comment.rfind("// "));
  variant.source = std::move(v.source);
  variant.grid = v.grid;
  variant.block = v.block;
  variant.shared = v.shared;
  if (launches.back().kind == CudaLaunch::Kind::Gemm) { // in place of cuBLASLt
    variant.buffers = std::move(v.buffers);
    variant.maps = std::move(v.maps);
    variant.persistent = v.persistent;
  }
  launches.back().variants.push_back(std::move(variant));
}

/// The gradient on tensor cores in two launches, three with column sums (see
/// the file comment).
bool Emitter::flashAttentionGrad(const AttentionLayout &a, int sums) {
  int dy = a.dy, y = a.y, lse = a.lse;
  DType t = flashType(a);
  int64_t lds = rowStride(a, t), eb = dtypeBytes(t);
  bool hopper = t != DType::F32; // the wgmma variants: 16-bit only
  // The workspace: delta = dy . y of every query (floats), then with `sums`
  // each 64-row chunk's column sums of dqkv (doubles).
  const bool colsum = sums >= 0;
  const int64_t deltaBytes = alignUp(4 * a.b * a.h * a.t, 8);
  const int64_t chunks = ceilDiv(a.t, int64_t(64)), width = a.qRow;
  needWorkspace(deltaBytes + (colsum ? 8 * a.b * chunks * width : 0));
  // In an "attention_grad" region (attentionGradRegion) dq and dk are
  // stored turned back by the ropes of q and k, and the columns of a
  // packed dqkv may be summed.
  double theta = k->floatAttr("rope_theta", 0.0);
  std::string consts =
      flashConsts(a) +
      "constexpr bool ROPE = " + (theta > 0 ? "true" : "false") +
      ";  // dq and dk turned back by a rope\nconstexpr float ROPE_THETA = " +
      flt(static_cast<float>(theta > 0 ? theta : 1.0)) +
      ";\nconstexpr bool ROPE_INTERLEAVED = " +
      (k->intAttr("rope_interleaved", 0) ? "true" : "false") +
      ";  // pairs (2i, 2i + 1), else (i, i + HD / 2)\n"
      "constexpr bool COLSUM = " +
      (colsum ? "true" : "false") +
      ";  // the column sums of dqkv to the workspace\n"
      "constexpr i64 NC = " +
      str(chunks) + ", COLS = " + str(width) +
      ";  // 64-row chunks a sequence, columns of dqkv\n"
      "constexpr int QCOL = " +
      str(a.qCol) + ", KCOL = " + str(a.kCol) + ", VCOL = " + str(a.vCol) +
      ";  // head 0's column of q, k, v\n" + cuh::flash_rope;
  // Each gradient kernel's `part`: its column sums' place in the workspace.
  auto withSums = [&](AttnArgs &ops) {
    if (!colsum) {
      ops.pointers += "  double *const part = nullptr;\n";
      return;
    }
    ops.args.push_back(ws("double", "sums_ws"));
    ops.pointers +=
        "  double *const part = sums_ws + " + str(deltaBytes / 8) + ";\n";
  };
  FlashTiles fq = flashTiles(FlashKernel::Dq, a.hd);
  AttnArgs ops = attentionOperands(a, AttnGrad::Dq);
  ops.args.insert(ops.args.begin(), in(dy, "dy"));
  ops.args.push_back(in(y, "y"));
  ops.args.push_back(in(lse, "lse"));
  ops.args.push_back(ws("float", "deltas"));
  withSums(ops);
  launch("dq",
         "tensor cores: one block per " + str(fq.rows()) +
             " queries of one (batch, head), key tiles of " + str(fq.step) +
             "; delta = dy.y to the workspace, dq = scale * sum over keys of "
             "ds k",
         ops.args, kAsyncHelpers, consts + fq.consts(),
         ops.pointers + cuh::flash_dq, a.b * a.h * ceilDiv(a.t, fq.rows()),
         128);
  launches.back().shared = (2 * fq.rows() + 4 * fq.step) * lds * eb;
  launches.back().tensorCores = true;
  if (hopper) {
    WgmmaTiles wq = wgmmaTiles(FlashKernel::Dq, a.hd);
    launch("dq",
           "warpgroup MMA (wgmma): " + wq.blocks() +
               " queries of one (batch, head), key tiles of " + str(wq.step) +
               "; delta = dy.y to the workspace, dq = scale * sum over keys of "
               "ds k",
           ops.args, kAsyncHelpers,
           consts + wq.consts(flashType(a) == DType::BF16),
           ops.pointers + cuh::flash_dq_wgmma,
           a.b * a.h * ceilDiv(a.t, wq.rows()), wq.threads(), wq.minBlocks);
    // Q and dy, and two stages of K and V, aligned to 1024 bytes.
    launches.back().shared = 1024 + (2 * wq.rows() + 4 * wq.step) * a.hd * 2;
    asVariant(9, 0, "sm_90a");
  }
  FlashTiles fk = flashTiles(FlashKernel::Dkdv, a.hd);
  ops = attentionOperands(a, AttnGrad::Dkdv);
  ops.args.insert(ops.args.begin(), in(dy, "dy"));
  ops.args.push_back(in(lse, "lse"));
  ops.args.push_back(wsIn("float", "deltas"));
  withSums(ops);
  launch("dkdv",
         "tensor cores: one block per " + str(fk.rows()) +
             " keys of one (batch, key head), query tiles of " + str(fk.step) +
             " of its " + str(a.group()) +
             " query heads; dk, dv = sums over queries",
         ops.args, kAsyncHelpers, consts + fk.consts(),
         ops.pointers + cuh::flash_dkdv, a.b * a.hkv * ceilDiv(a.t, fk.rows()),
         128);
  launches.back().shared =
      (2 * fk.rows() + 4 * fk.step) * lds * eb + 4 * 4 * fk.step;
  launches.back().tensorCores = true;
  if (hopper) {
    WgmmaTiles wk = wgmmaTiles(FlashKernel::Dkdv, a.hd);
    launch("dkdv",
           "warpgroup MMA (wgmma): " + wk.blocks() +
               " keys of one (batch, key head), query tiles of " +
               str(wk.step) + " of its " + str(a.group()) +
               " query heads; dk, dv = sums over queries",
           ops.args, kAsyncHelpers,
           consts + wk.consts(flashType(a) == DType::BF16),
           ops.pointers + cuh::flash_dkdv_wgmma,
           a.b * a.hkv * ceilDiv(a.t, wk.rows()), wk.threads(), wk.minBlocks);
    // K and V, two stages of Q and dy (aligned to 1024 bytes), and two of the
    // queries' lse and delta.
    launches.back().shared =
        1024 + (2 * wk.rows() + 4 * wk.step) * a.hd * 2 + 4 * 4 * wk.step;
    asVariant(9, 0, "sm_90a");
  }
  if (colsum)
    columnSumsFinal({{sums, ""}},
                    "constexpr i64 COLS = " + str(width) +
                        ", CHUNKS = " + str(a.b * chunks) + ";\n",
                    a.b * chunks, width, deltaBytes / 8);
  return true;
}
