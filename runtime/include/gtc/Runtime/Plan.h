//===- Plan.h - The executable description of a training step ---*- C++ -*-===//
//
// A plan is what the compiler hands the runtime: buffers placed in a few
// memory regions by a static, liveness-based memory plan, the kernels in
// order with their arguments, the parameters with their initializers, and the
// training configuration. It has no MLIR in it; `serialize`/`deserialize`
// give it a versioned text form (for `gtc compile` and for inspection with
// `gtc run --emit=plan`).
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_PLAN_H
#define GTC_RUNTIME_PLAN_H

#include "gtc/Runtime/Data.h"
#include "gtc/Runtime/ScalarOps.h" // Ops.def's activations
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gtc::rt {

/// The plan format version written by serialize() and accepted by
/// deserialize().
inline constexpr int kPlanVersion = 1;

/// Where a buffer lives. Parameters, gradients and optimizer state have the
/// same layout (a parameter's gradient is at the same offset in Grad), so the
/// optimizer is one pass over flat memory.
enum class Region : uint8_t {
  Param, ///< Trainable parameters (persistent).
  Grad,  ///< Their gradients, written by the backward pass.
  Input, ///< Inputs and labels, filled from the data loader each step.
  Const, ///< Constants, filled once when the plan is loaded.
  Temp,  ///< Activations and other temporaries, reused per the memory plan.
  /// Values inside fusion regions (Kernel::body): where the CPU executor
  /// keeps them between the ops of a region; a GPU kernel keeps them in
  /// registers, so no device memory backs this region.
  Local,
  /// The parameters in the step's 16-bit type (Plan::paramCopies), element
  /// i of Copy the cast of element i of Param. Persistent.
  Copy,
  /// A generation plan's KV caches (gt.state): zeroed when the plan is
  /// loaded, written in place by its kernels, kept between runs.
  State,
};

const char *regionName(Region r);

/// One tensor of the plan. Offsets and region sizes are in 4-byte slots: a
/// 4-byte element takes one slot, two 16-bit elements share one (a buffer
/// starts on a slot boundary). An executor may widen every element (float64
/// for gradient checks, float for 16-bit buffers on the CPU) by scaling.
struct Buffer {
  std::string name; ///< The value's name in the IR, for --explain and errors.
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  Region region = Region::Temp;
  int64_t offset = 0; ///< In 4-byte slots (slots()) from the region's start.
  /// A view (a reshape, or a slice that is a contiguous block: no kernel)
  /// of this buffer's memory, or -1. A view has its buffer's region and an
  /// offset inside it (a reshape's is the buffer's own); that memory lives
  /// until the last use of any view of it.
  int viewOf = -1;
  int64_t elements() const;
  /// The 4-byte slots it occupies: ceil(elements * element bytes / 4).
  int64_t slots() const;
  /// Whether the two buffers share any memory.
  bool overlaps(const Buffer &other) const;
};

/// An attribute of a kernel: an integer, a float, a string or an int list.
struct Attr {
  enum class Kind { Int, Float, Str, Ints } kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};

/// The op a kernel runs (Ops.def).
enum class OpKind : uint8_t {
#define GTC_OP(Kind, Name) Kind,
#include "gtc/Runtime/Ops.def"
};

/// The number of op kinds.
inline constexpr int kOpKinds = 0
#define GTC_OP(Kind, Name) +1
#include "gtc/Runtime/Ops.def"
    ;

/// The op's name in plans: the gt op's mnemonic ("layernorm_grad").
const char *opName(OpKind kind);
/// The kind named `name`; false if no kernel op has that name.
bool parseOpKind(const std::string &name, OpKind &kind);

/// One kernel launch: the op, buffer ids, attributes.
struct Kernel {
  OpKind op = OpKind::Copy;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::map<std::string, Attr> attrs;
  /// A fusion region ("fused"): its ops in order, reading the kernel's
  /// inputs and Local buffers and writing Local buffers and the kernel's
  /// outputs.
  std::vector<Kernel> body;
  /// Where in the .gt source the op comes from ("model.gt:6:7"; a gradient
  /// op has its forward op's), or "" (--check-numerics names it).
  std::string loc;

  int64_t intAttr(const std::string &key, int64_t fallback) const;
  double floatAttr(const std::string &key, double fallback) const;
  std::string strAttr(const std::string &key, const std::string &fallback) const;
  std::vector<int64_t> intsAttr(const std::string &key) const;
  /// A pad's or slice's shift from its result's coordinates to its
  /// input's, one a dimension of `rank`: a slice reads its input at
  /// +offsets, a pad at -offsets.
  std::vector<int64_t> padShift(size_t rank) const;
};

struct Plan;

/// Where an attention kernel (gt.attention or gt.attention_grad) finds its
/// heads: packed qkv [B, T, 3D], packed heads [B, T, H + 2 Hkv, d], or
/// q [B, T, H, d] with k, v [B, T, Hkv, d] (query head h reads key and
/// value head h / (H / Hkv)). Column offsets
/// and row strides count elements; the output y and its gradient are
/// [B, T, H d] either way, and the gradients have their operands' layouts.
struct AttentionLayout {
  int64_t b = 0, t = 0, h = 0, hkv = 0, hd = 0;
  bool packed = true;
  bool causal = true;
  int q = -1, k = -1, v = -1;    ///< operand buffers (packed: qkv 3 times)
  int dq = -1, dk = -1, dv = -1; ///< gradient buffers (attention_grad)
  int y = -1, lse = -1, dy = -1; ///< output, statistics, dy (grad)
  int64_t qCol = 0, kCol = 0, vCol = 0; ///< head 0's column in a row
  int64_t qRow = 0, kvRow = 0;          ///< elements per position
  std::string error;                    ///< why the kernel's shapes do not fit

  int64_t group() const { return h / hkv; }
  int64_t width() const { return h * hd; }
};
/// The layout of attention kernel `k`, or one with `error` set.
AttentionLayout attentionLayout(const Plan &plan, const Kernel &k);

/// A trainable parameter: its buffer, gradient buffer and initializer.
struct Param {
  std::string name;
  int buffer = -1;
  int grad = -1;
  std::string init; ///< zeros, ones, constant, normal, uniform
  std::vector<double> args;
};

/// How a parameter's elements are drawn (gtc_scalar::init_value in
/// ScalarOps.h, on the CPU by initParameters and on the GPU by gtc_init):
/// its kind (0 zeros, 1 the constant a, 2 normal of mean a and deviation c,
/// 3 uniform in [a, c)) and its generator's seed, mixed from the run's seed
/// and the parameter's name.
struct ParamDraw {
  int kind = 0;
  double a = 0, c = 0;
  uint64_t seed = 0;
};
ParamDraw paramDraw(const Param &p, uint64_t runSeed);

/// A constant buffer's values: one value (a splat) or one per element.
struct Constant {
  int buffer = -1;
  std::vector<double> values;
};

/// A model input or label: which buffer the loader fills.
struct Feed {
  std::string name;
  int buffer = -1;
  bool label = false;
};

/// The train block's choices, typed: parsed once (by the compiler, or from
/// a plan's text), so the CPU and CUDA trainers cannot read them apart.
enum class OptimizerKind : uint8_t { Sgd, Adam, AdamW };
enum class ScheduleKind : uint8_t { Constant, Linear, Cosine };
enum class Precision : uint8_t { Fp32, Tf32, Bf16, Fp16 };

/// Their names in .gt files, plans and logs ("adamw", "cosine", "bf16").
const char *name(OptimizerKind kind);
const char *name(ScheduleKind kind);
const char *name(Precision precision);
/// The value named `text`; false if there is none.
bool parse(const std::string &text, OptimizerKind &out);
bool parse(const std::string &text, ScheduleKind &out);
bool parse(const std::string &text, Precision &out);

/// The train block, with defaults filled in by the compiler.
struct TrainConfig {
  struct Source {
    std::string kind; ///< "" (none), idx, tokens, text
    std::string images, labels, path;
    double scale = 1.0;
    int64_t seq = 0;
  };
  Source data, eval;
  /// The other fields, one a GTC_TRAIN_CONFIG_FIELD row of
  /// TrainSettings.def (which gives each its default and meaning).
#define GTC_TRAIN_CONFIG_FIELD(SETTING, KEY, MEMBER, KIND, TYPE, DEFAULT)      \
  TYPE MEMBER = DEFAULT;
#include "gtc/Runtime/TrainSettings.def"
};

/// A compiled training step (or evaluation pass) of one model.
struct Plan {
  std::string model;
  /// "step" (forward + backward), "eval" (the loss and accuracy) or
  /// "decode" (a window of generation: tokens and positions in, logits out).
  std::string kind = "step";
  int64_t batch = 0;
  /// Gradient accumulation: a training step runs the kernels on this many
  /// micro-batches of `batch` rows, sums their gradients and updates once
  /// (the global batch is batch * microBatches).
  int64_t microBatches = 1;
  /// ZeRO-2 (shard = gradients) over this many processes when > 1: the
  /// parameter region is laid out a gt-bucket bucket after another, each
  /// bucket's gradients are one temporary mirroring its range of it, and
  /// there is no gradient region; each process keeps the reduced gradients
  /// of its share (shareOf()) and the optimizer state of that share.
  int64_t shardRanks = 1;
  std::vector<Buffer> buffers;
  std::vector<Kernel> kernels;
  std::vector<Param> params;
  std::vector<Constant> constants;
  std::vector<Feed> feeds;
  /// Buffer of the scalar loss; in a "decode" plan (gt-decode, `gtc
  /// sample`) the f32 logits [B, S, V] of the window instead.
  int loss = -1;
  int accuracy = -1; ///< Buffer of the scalar accuracy (eval), or -1.
  /// Buffer of the backward pass's seed, d loss / d loss (a constant 1), or
  /// -1. With dynamic loss scaling (fp16) the runtime keeps the current
  /// scale there, so every gradient comes out multiplied by it.
  int lossScale = -1;
  /// The kernel that writes Region::Copy, or -1: a step's multi-tensor
  /// region of the parameters' casts to bf16 or f16 (gt-fuse's
  /// castParameters), its results kept between steps. The CPU runs it in
  /// every step like any kernel. A GPU runs it only after the parameters
  /// are written from the host; otherwise its optimizer update writes each
  /// copy with its parameter, which saves the step a pass over the
  /// parameters.
  int paramCopies = -1;
  /// Where a step's gradients may lie inside Region::Temp, in slots, or -1:
  /// the gradient region, as laid out, at this offset of the temporaries',
  /// whose memory plan keeps each gradient apart from every temporary live
  /// between its first write and the update. A runtime may keep the
  /// gradients in their own memory instead.
  int64_t gradsInTemp = -1;
  /// Region sizes in elements.
  std::map<Region, int64_t> regionSize;
  TrainConfig config;

  int64_t parameterCount() const;
  /// The elements of the parameter region each of `ranks` processes
  /// updates when sharded (ZeRO-1 and 2): equal shares of whole 128s, the
  /// last ones shorter or empty.
  int64_t shareOf(int64_t ranks) const;
  /// The optimizer's state a parameter element, in floats: Adam's two
  /// moments, SGD's momentum buffer (which the update reads even at
  /// momentum 0).
  int64_t stateFloats() const {
    return config.optimizer == OptimizerKind::Sgd ? 1 : 2;
  }
  /// cuBLASLt's workspace on a GPU, in bytes.
  static constexpr int64_t kGemmWorkspaceBytes = int64_t(32) << 20;
  /// Bytes of a training step's memory by kind, and their sum: the peak the
  /// memory plan predicts (`gtc run --explain`; gt-checkpoint's budget).
  struct Memory {
    int64_t weights = 0, gradients = 0, optimizerState = 0, temporaries = 0,
            inputs = 0, constants = 0, gemmWorkspace = 0,
            accumulator = 0, ///< the gradients' sum over micro-batches
        weightCopies = 0,    ///< Region::Copy
        state = 0;           ///< Region::State (KV caches)
    int64_t peak() const {
      return weights + gradients + optimizerState + temporaries + inputs +
             constants + gemmWorkspace + accumulator + weightCopies + state;
    }
  };
  Memory memory() const;
  /// Whether training uses dynamic loss scaling (LossScaler): fp16 steps.
  bool scalesLoss() const;
  /// Whether `paramCopies` names a step's multi-tensor region whose ops
  /// each cast a parameter to one 16-bit type, into the Copy buffer at the
  /// parameter's place (element i of Param to element i of Copy), with Copy
  /// as large as Param: what lets an optimizer write every copy in place.
  bool paramCopiesValid() const;
  /// The type of the parameters' copies (F32 when there are none).
  DType paramCopyType() const;
};

/// The ids the i32 buffer `buffer` may hold, [0, n): the rows of the tables
/// it indexes and the classes of the logits it labels (the fewest of them),
/// or 0 when it indexes nothing.
int64_t indexRange(const Plan &plan, int buffer);

/// The batch a step of `plan` trains, run by `processes` data-parallel
/// processes: "batch 32", "batch 32 (2 processes of 16 rows)", "batch 32
/// (micro-batches of 8)" (--batch takes the first number).
std::string describeBatch(const Plan &plan, int processes);

/// The versioned text form of a plan.
std::string serialize(const Plan &plan);
/// Parses serialize()'s output; on failure returns false and sets `error`
/// (with the line number).
bool deserialize(const std::string &text, Plan &plan, std::string &error);

} // namespace gtc::rt

#endif // GTC_RUNTIME_PLAN_H
