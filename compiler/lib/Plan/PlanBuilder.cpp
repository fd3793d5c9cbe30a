//===- PlanBuilder.cpp - From a gt function to a runtime plan -------------===//

#include "gtc/Plan/PlanBuilder.h"
#include "gtc/Runtime/Capabilities.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include <algorithm>
#include <climits>
#include <optional>
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::gt;
namespace rt = gtc::rt;
using MemRegion = gtc::rt::Region;

namespace {

/// Buffers are aligned to 64 slots (256 bytes) inside their regions: what
/// cuBLASLt's fastest kernels (TMA on Hopper) and 16-byte vector accesses
/// want.
constexpr int64_t kAlign = 64;
/// Parameters are aligned to twice that: a parameter's 16-bit copy
/// (placeParamCopies) is at half its offset, and keeps kAlign there.
constexpr int64_t kParamAlign = 2 * kAlign;

int64_t alignUp(int64_t n, int64_t align = kAlign) {
  return (n + align - 1) / align * align;
}

/// The free stretches between disjoint intervals that are never free (the
/// gradients' alignment gaps), with the longest stretch of every range of
/// them in a tree: the lowest place for a block at or after an offset in
/// O(log n), where a scan of the gaps made placement quadratic.
class FreeRuns {
public:
  explicit FreeRuns(std::vector<std::pair<int64_t, int64_t>> gaps) {
    std::sort(gaps.begin(), gaps.end());
    int64_t at = 0;
    for (auto [begin, end] : gaps) {
      runs.push_back({at, begin});
      at = end;
    }
    runs.push_back({at, INT64_MAX});
    while (leaves < runs.size())
      leaves *= 2;
    longest.assign(2 * leaves, -1);
    for (size_t i = 0; i < runs.size(); ++i)
      longest[leaves + i] = runs[i].second - runs[i].first;
    for (size_t i = leaves - 1; i > 0; --i)
      longest[i] = std::max(longest[2 * i], longest[2 * i + 1]);
  }

  /// The lowest p >= at where [p, p + need) holds no gap.
  int64_t firstFit(int64_t at, int64_t need) const {
    size_t j = std::upper_bound(runs.begin(), runs.end(), at,
                                [](int64_t x, const auto &run) {
                                  return x < run.second;
                                }) -
               runs.begin();
    at = std::max(at, runs[j].first);
    if (need <= runs[j].second - at)
      return at;
    return runs[firstLonger(1, 0, leaves, j + 1, need)].first;
  }

private:
  /// The first run from `from` on, under `node` (runs [lo, hi)), that is at
  /// least `need` long; the last run is unbounded, so one always is.
  size_t firstLonger(size_t node, size_t lo, size_t hi, size_t from,
                     int64_t need) const {
    if (hi <= from || longest[node] < need)
      return SIZE_MAX;
    if (hi - lo == 1)
      return lo;
    size_t mid = (lo + hi) / 2;
    size_t found = firstLonger(2 * node, lo, mid, from, need);
    return found != SIZE_MAX ? found
                             : firstLonger(2 * node + 1, mid, hi, from, need);
  }

  std::vector<std::pair<int64_t, int64_t>> runs;
  std::vector<int64_t> longest;
  size_t leaves = 1;
};

/// The slots from the input's start at which a slice's block begins, when
/// the block is contiguous in the row-major input (every dimension before
/// the first one it cuts has size 1 in the block, every one after is
/// whole) and aligned like a buffer (kAlign): the slice is then a view.
std::optional<int64_t> contiguousSlice(SliceOp slice) {
  auto in = cast<RankedTensorType>(slice.getInput().getType());
  auto out = cast<RankedTensorType>(slice.getResult().getType());
  if (!in.hasStaticShape() || !out.hasStaticShape())
    return std::nullopt;
  ArrayRef<int64_t> from = in.getShape(), to = out.getShape();
  int64_t rank = in.getRank(), cut = rank;
  for (int64_t d = 0; d < rank && cut == rank; ++d)
    if (to[d] != from[d])
      cut = d;
  int64_t elements = 0, stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if ((d < cut && to[d] != 1) || (d > cut && to[d] != from[d]))
      return std::nullopt;
    if (std::optional<ArrayAttr> offsets = slice.getOffsets())
      elements += cast<IntegerAttr>((*offsets)[d]).getInt() * stride;
    stride *= from[d];
  }
  int64_t bytes = elements * in.getElementTypeBitWidth() / 8;
  if (bytes % (4 * kAlign) != 0)
    return std::nullopt;
  return bytes / 4;
}

class PlanBuilder {
public:
  PlanBuilder(func::FuncOp func, bool views, int64_t shardRanks,
              bool gradientsApart, int64_t classifierChunkBytes)
      : func(func), views(views), shardRanks(shardRanks),
        gradientsApart(gradientsApart),
        classifierChunkBytes(classifierChunkBytes) {}

  FailureOr<rt::Plan> build();

private:
  /// Creates the buffer of `v` (not yet placed).
  FailureOr<int> addBuffer(Value v, MemRegion region, std::string name);
  int bufferOf(Value v) const { return buffers.lookup(v); }
  /// The buffer whose memory `id` uses: itself, or the one it is a view of.
  int storageOf(int id) const {
    int of = plan.buffers[id].viewOf;
    return of < 0 ? id : of;
  }
  /// Makes `v` a view of `of`'s memory (no kernel), `slots` 4-byte slots
  /// into it.
  void addView(Value v, int of, std::string name = "reshape",
               int64_t slots = 0);
  /// The kernel of `op` (buffers must exist): op name, buffers, attributes.
  FailureOr<rt::Kernel> makeKernel(Operation *op) const;
  LogicalResult addKernel(Operation *op);
  /// The logits that a "loss" region may overwrite with their gradient
  /// (llm.c's classifier: the bf16 logits become their gradient, and the
  /// largest activation of a language model is stored once): a temporary of
  /// the gradient's type that nothing else reads. Null otherwise.
  Value inPlaceLoss(FusedOp fused) const;
  /// Gives the last kernel, a "classifier" region, its chunk: a temporary
  /// of a few thousand rows of logits (kernel attribute `chunk_buffer`),
  /// in which the GPU computes the logits and their gradient a chunk of
  /// rows at a time. A small head (isSmallHead) needs none.
  LogicalResult addClassifierChunk(FusedOp fused);
  /// Gives the values inside a fusion region their buffers: the region's
  /// inputs and outputs, or Local ones.
  LogicalResult addFusedBody(FusedOp fused);
  /// Keeps a step's casts of its parameters (gt-fuse's multi-tensor region
  /// of them) between steps: their results go to Region::Copy at their
  /// parameters' places, and the plan names the kernel (paramCopies).
  void placeParamCopies();
  void placeTemporaries();
  /// ZeRO-2 (shardRanks > 1): lays the parameters out a gt-bucket bucket
  /// after another, and makes each bucket's gradients one temporary (its
  /// group) that mirrors the bucket's range of the parameter region, live
  /// from the first of them to the end of the step; the gradient region is
  /// gone (the runtime keeps this rank's reduced share of it instead).
  LogicalResult groupGradients();
  /// Plan::gradsInTemp: lays the parameters out with the gradients'
  /// alignment gaps together at the end.
  void layOutParamsForGradsInTemp();
  /// The gradients written in place, and the results that are views of
  /// them (inPlaceGrad, viewOf).
  void findInPlaceGradients();
  // build()'s steps: the buffers (and kernels) of each op in order, then
  // the results, the regions' sizes and the placement of temporaries.
  LogicalResult addParam(ParamOp p);
  LogicalResult addFeed(Operation &op);
  LogicalResult addConstant(Operation &op);
  LogicalResult addGradient(GradientOp g);
  LogicalResult addComputing(Operation &op);
  LogicalResult finish(func::ReturnOp ret);

  func::FuncOp func;
  bool views;
  int64_t shardRanks;
  bool gradientsApart;
  int64_t classifierChunkBytes;
  /// ZeRO-2: gradients placed inside their bucket's group, at their
  /// parameter's place in it.
  std::map<int, std::pair<int, int64_t>> inGroup; // buffer -> (group, at)
  /// Gradients that can be written in place (findInPlaceGradients), with
  /// their gt.gradient, and the results that are views of another value.
  DenseMap<Value, GradientOp> inPlaceGrad;
  DenseMap<Value, Value> viewOf; // a result -> the value it is a view of
  /// The index of each parameter in plan.params, by name.
  llvm::StringMap<int> paramIndex;
  /// Packed parameters (gt.param with parts), by name: the packed buffer,
  /// its gradient's, and its parts' indices in plan.params. The parts'
  /// buffers and gradients are views of the two.
  struct Packed {
    int buffer = -1, grad = -1;
    std::vector<int> parts;
  };
  llvm::StringMap<Packed> packed;
  /// The buffers that hold the parameters (or, with `grads`, their
  /// gradients) in plan.params' order, each once: a parameter's own, or
  /// its packed parameter's.
  std::vector<int> paramStorage(bool grads = false) const;
  rt::Plan plan;
  DenseMap<Value, int> buffers;
  /// Kernel index of each temporary's definition and last use.
  std::vector<int64_t> defAt, lastUse;
  std::map<MemRegion, int64_t> cursor;
  /// The largest Local area of one fusion region.
  int64_t localSize = 0;
};

FailureOr<int> PlanBuilder::addBuffer(Value v, MemRegion region,
                                      std::string name) {
  if (!v) { // a gradient slot: the caller sets its shape
    rt::Buffer b;
    b.name = std::move(name);
    b.region = region;
    plan.buffers.push_back(std::move(b));
    defAt.push_back(-1);
    lastUse.push_back(-1);
    return static_cast<int>(plan.buffers.size() - 1);
  }
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return emitError(v.getLoc())
           << "the plan needs static shapes, got " << v.getType()
           << "; run gt-shape-inference=batch=N first";
  Type et = type.getElementType();
  rt::Buffer b;
  if (et.isF32())
    b.dtype = rt::DType::F32;
  else if (et.isInteger(32))
    b.dtype = rt::DType::I32;
  else if (et.isBF16())
    b.dtype = rt::DType::BF16;
  else if (et.isF16())
    b.dtype = rt::DType::F16;
  else
    return emitError(v.getLoc())
           << "the runtime cannot store " << formatType(type)
           << "; use f32, bf16, f16 or i32 elements";
  b.name = std::move(name);
  b.shape.assign(type.getShape().begin(), type.getShape().end());
  b.region = region;
  if (region != MemRegion::Temp && region != MemRegion::Grad) {
    b.offset = cursor[region];
    cursor[region] += alignUp(std::max<int64_t>(1, b.slots()),
                              region == MemRegion::Param ? kParamAlign
                                                         : kAlign);
  }
  int id = static_cast<int>(plan.buffers.size());
  plan.buffers.push_back(std::move(b));
  defAt.push_back(-1);
  lastUse.push_back(-1);
  if (v)
    buffers[v] = id;
  return id;
}

/// "file:line:col" of the first file location in `loc` (inside fused, named
/// or call-site locations), or "".
static std::string sourceLocation(Location loc) {
  std::string text;
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = (file.getFilename().str() + ":" + std::to_string(file.getLine()) +
              ":" + std::to_string(file.getColumn()));
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

/// Converts an op's attributes into kernel attributes (the ones the kernels
/// read: flags, axes, epsilon, heads, kinds, permutations).
FailureOr<rt::Kernel> PlanBuilder::makeKernel(Operation *op) const {
  rt::Kernel k;
  if (!rt::parseOpKind(op->getName().stripDialect().str(), k.op))
    return op->emitOpError("has no runtime kernel (runtime/include/gtc/"
                           "Runtime/Ops.def)");
  k.loc = sourceLocation(op->getLoc());
  for (Value v : op->getOperands())
    k.inputs.push_back(bufferOf(v));
  for (Value v : op->getResults())
    k.outputs.push_back(bufferOf(v));
  for (NamedAttribute attr : op->getAttrs()) {
    rt::Attr a;
    Attribute v = attr.getValue();
    if (auto b = dyn_cast<BoolAttr>(v)) {
      a.i = b.getValue();
    } else if (auto i = dyn_cast<IntegerAttr>(v)) {
      a.i = i.getInt();
    } else if (auto f = dyn_cast<FloatAttr>(v)) {
      a.kind = rt::Attr::Kind::Float;
      a.f = f.getValueAsDouble();
    } else if (auto s = dyn_cast<StringAttr>(v)) {
      a.kind = rt::Attr::Kind::Str;
      a.s = s.str();
    } else if (auto arr = dyn_cast<ArrayAttr>(v);
               arr && llvm::all_of(arr, [](Attribute e) {
                 return isa<IntegerAttr>(e);
               })) {
      a.kind = rt::Attr::Kind::Ints;
      for (Attribute e : arr)
        a.ints.push_back(cast<IntegerAttr>(e).getInt());
    } else {
      continue;
    }
    k.attrs[attr.getName().str()] = a;
  }
  if (auto fused = dyn_cast<FusedOp>(op)) {
    for (Operation &inner : fused.getBody().front().without_terminator()) {
      FailureOr<rt::Kernel> sub = makeKernel(&inner);
      if (failed(sub))
        return failure();
      k.body.push_back(std::move(*sub));
    }
  }
  return k;
}

LogicalResult PlanBuilder::addKernel(Operation *op) {
  FailureOr<rt::Kernel> made = makeKernel(op);
  if (failed(made))
    return failure();
  rt::Kernel k = std::move(*made);
  int index = static_cast<int>(plan.kernels.size());
  for (int in : k.inputs)
    lastUse[storageOf(in)] = std::max<int64_t>(lastUse[storageOf(in)], index);
  for (int out : k.outputs)
    if (defAt[out] < 0)
      defAt[out] = index;
  plan.kernels.push_back(std::move(k));
  return success();
}

void PlanBuilder::addView(Value v, int of, std::string name, int64_t slots) {
  int root = storageOf(of);
  rt::Buffer b = plan.buffers[root];
  auto type = cast<RankedTensorType>(v.getType());
  b.shape.assign(type.getShape().begin(), type.getShape().end());
  b.name = std::move(name);
  b.viewOf = root;
  // Until the memory is placed: the slots from the root's start.
  b.offset = (of == root ? 0 : plan.buffers[of].offset) + slots;
  int id = static_cast<int>(plan.buffers.size());
  plan.buffers.push_back(std::move(b));
  defAt.push_back(-1);
  lastUse.push_back(-1);
  buffers[v] = id;
}

Value PlanBuilder::inPlaceLoss(FusedOp fused) const {
  if (!views || !fused || fused.getKind() != "loss" ||
      fused.getNumResults() != 2 || fused.getInputs().empty())
    return {};
  Value logits = fused.getInputs()[0];
  auto it = buffers.find(logits);
  if (!logits.hasOneUse() || logits.getType() != fused.getResult(1).getType() ||
      it == buffers.end())
    return {};
  const rt::Buffer &b = plan.buffers[it->second];
  return b.region == MemRegion::Temp && b.viewOf < 0 ? logits : Value();
}

LogicalResult PlanBuilder::addClassifierChunk(FusedOp fused) {
  // Chunks of at most classifierChunkBytes (finishPlan's choice): fewer
  // chunks re-read dW less often (each chunk adds its share to dW, 154 MB
  // in f32 for GPT-2) and make longer GEMMs, smaller ones save more memory.
  // Rows come in multiples of 128, so every chunk's operands stay 256-byte
  // aligned.
  int64_t limit = std::max<int64_t>(1, classifierChunkBytes);
  // The chunk has the element type of the logits' buffer (the body's local
  // of the same type gives it).
  Operation &gemm = fused.getBody().front().front();
  Value logits = gemm.getResult(0);
  auto type = cast<RankedTensorType>(logits.getType());
  // A small head runs as one kernel that keeps its logits in shared memory.
  if (gtc::rt::isSmallHead(type.getNumElements() / type.getShape().back(),
                           type.getShape().back(),
                           cast<RankedTensorType>(gemm.getOperand(0).getType())
                               .getShape()
                               .back()))
    return success();
  FailureOr<int> made = addBuffer({}, MemRegion::Temp, "classifier chunk");
  if (failed(made))
    return failure();
  rt::Buffer &b = plan.buffers[*made];
  b.dtype = plan.buffers[bufferOf(logits)].dtype;
  b.shape = {type.getNumElements() / type.getShape().back(),
             type.getShape().back()};
  int64_t v = b.shape.back(), rows = b.shape[0];
  int64_t bytes = b.slots() * 4;
  // At least two chunks of logits over half the limit: with one the whole
  // logits would exist after all (llama124m's 1.05 GB of bf16 logits took
  // 500 MB more at its peak, 7712 MiB, above torch.compile's 7.43 GiB of
  // the forty-third session, and its step was no faster: forty-fourth).
  int64_t chunks = std::max<int64_t>(2 * bytes > limit ? 2 : 1,
                                     (bytes + limit - 1) / limit);
  int64_t r = std::min(rows, ((rows + chunks - 1) / chunks + 127) / 128 * 128);
  b.shape = {r, v};
  int index = static_cast<int>(plan.kernels.size()) - 1;
  defAt[*made] = lastUse[*made] = index;
  rt::Attr a;
  a.i = *made;
  plan.kernels.back().attrs["chunk_buffer"] = a;
  return success();
}

LogicalResult PlanBuilder::addFusedBody(FusedOp fused) {
  Block &body = fused.getBody().front();
  for (auto [arg, input] : llvm::zip(body.getArguments(), fused.getInputs()))
    buffers[arg] = bufferOf(input);
  for (auto [v, result] :
       llvm::zip(fused.getYield().getValues(), fused.getResults()))
    buffers[v] = bufferOf(result);
  // Each region's locals start at 0: no two regions run at once.
  cursor[MemRegion::Local] = 0;
  for (Operation &inner : body.without_terminator())
    for (Value r : inner.getResults())
      if (!buffers.count(r) &&
          failed(addBuffer(r, MemRegion::Local,
                           inner.getName().stripDialect().str())))
        return failure();
  localSize = std::max(localSize, cursor[MemRegion::Local]);
  return success();
}

void PlanBuilder::placeParamCopies() {
  if (plan.kind != "step")
    return;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    rt::Kernel &k = plan.kernels[i];
    if (k.op != rt::OpKind::Fused ||
        k.strAttr("kind", "") != "multi_tensor")
      continue;
    // Every op a cast of a parameter (not a view of one: the copy takes
    // the parameter's place) to one 16-bit type, each parameter once.
    std::optional<rt::DType> type;
    std::set<int> from;
    bool casts = llvm::all_of(k.body, [&](const rt::Kernel &sub) {
      if (sub.op != rt::OpKind::Cast || sub.inputs.size() != 1 ||
          sub.outputs.size() != 1)
        return false;
      const rt::Buffer &in = plan.buffers[sub.inputs[0]];
      const rt::Buffer &out = plan.buffers[sub.outputs[0]];
      if (!type)
        type = out.dtype;
      return in.region == MemRegion::Param && in.viewOf < 0 &&
             in.dtype == rt::DType::F32 && out.dtype == *type &&
             rt::dtypeBytes(out.dtype) == 2 && out.viewOf < 0 &&
             in.offset % kParamAlign == 0 &&
             from.insert(sub.inputs[0]).second;
    });
    if (!casts)
      continue;
    for (const rt::Kernel &sub : k.body) {
      rt::Buffer &out = plan.buffers[sub.outputs[0]];
      if (out.region == MemRegion::Temp) {
        out.region = MemRegion::Copy;
        out.offset = plan.buffers[sub.inputs[0]].offset / 2;
      }
    }
    plan.regionSize[MemRegion::Copy] =
        (plan.regionSize[MemRegion::Param] + 1) / 2;
    plan.paramCopies = static_cast<int>(i);
    return;
  }
}

/// First-fit by decreasing size: a temporary may share memory with any whose
/// lifetime [def, last use] does not overlap its own.
void PlanBuilder::placeTemporaries() {
  std::vector<int> temps;
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].region == MemRegion::Temp &&
        plan.buffers[i].viewOf < 0 && !inGroup.count(static_cast<int>(i)))
      temps.push_back(static_cast<int>(i));
  std::stable_sort(temps.begin(), temps.end(), [&](int a, int b) {
    return plan.buffers[a].slots() > plan.buffers[b].slots();
  });
  // What is placed, by offset: the lowest free place for a temporary is
  // found in one walk from the bottom that ends where it fits.
  std::set<std::tuple<int64_t, int64_t, int>> placed;
  auto addPlaced = [&](int id) {
    const rt::Buffer &b = plan.buffers[id];
    placed.insert(
        {b.offset, b.offset + alignUp(std::max<int64_t>(1, b.slots())), id});
  };
  int64_t size = 0;
  // The gradients, when they share the temporaries' memory: already
  // placed, at their parameters' offsets from gradsInTemp, each live from
  // its first write to the update after the step. The gaps between them
  // are never written (the update and the norm read them as zeros): no
  // temporary may take them.
  std::vector<std::pair<int64_t, int64_t>> gaps;
  if (plan.gradsInTemp >= 0) {
    for (int id : paramStorage(/*grads=*/true)) {
      rt::Buffer &grad = plan.buffers[id];
      grad.offset += plan.gradsInTemp;
      addPlaced(id);
      if (defAt[id] < 0)
        defAt[id] = 0;
      lastUse[id] = static_cast<int64_t>(plan.kernels.size());
      int64_t end = grad.offset + std::max<int64_t>(1, grad.slots());
      int64_t next = grad.offset +
                     alignUp(std::max<int64_t>(1, grad.slots()), kParamAlign);
      if (end < next)
        gaps.push_back({end, next});
    }
    size = plan.gradsInTemp + plan.regionSize[MemRegion::Grad];
  }
  FreeRuns freeRuns(std::move(gaps));
  for (int t : temps) {
    int64_t need = alignUp(std::max<int64_t>(1, plan.buffers[t].slots()));
    int64_t lo = defAt[t], hi = std::max(lastUse[t], defAt[t]);
    int64_t offset = freeRuns.firstFit(0, need);
    for (auto [begin, end, p] : placed) {
      if (offset + need <= begin)
        break;
      if (end > offset && defAt[p] <= hi &&
          lo <= std::max(lastUse[p], defAt[p]))
        offset = freeRuns.firstFit(end, need);
    }
    plan.buffers[t].offset = offset;
    size = std::max(size, offset + need);
    addPlaced(t);
  }
  plan.regionSize[MemRegion::Temp] = size;
  if (plan.gradsInTemp >= 0)
    for (int id : paramStorage(/*grads=*/true))
      plan.buffers[id].offset -= plan.gradsInTemp; // into Region::Grad
  for (auto [member, place] : inGroup)
    plan.buffers[member].offset = plan.buffers[place.first].offset + place.second;
}

void PlanBuilder::layOutParamsForGradsInTemp() {
  // The parameters that fill their aligned place first, in order; then the
  // others, whose gradients' alignment gaps are never written (the update
  // and the norm read them as zeros), in one short run at the end that
  // leaves the rest of the gradients' memory in long free stretches.
  int64_t at = 0;
  for (bool gapless : {true, false})
    for (int id : paramStorage()) {
      rt::Buffer &param = plan.buffers[id];
      if ((param.slots() % kParamAlign == 0) != gapless)
        continue;
      param.offset = at;
      at += alignUp(std::max<int64_t>(1, param.slots()), kParamAlign);
    }
}

std::vector<int> PlanBuilder::paramStorage(bool grads) const {
  std::vector<int> ids;
  std::set<int> seen;
  for (const rt::Param &p : plan.params) {
    int of = grads ? p.grad : p.buffer;
    if (of >= 0 && seen.insert(storageOf(of)).second)
      ids.push_back(storageOf(of));
  }
  return ids;
}

LogicalResult PlanBuilder::groupGradients() {
  // The buckets: each all_reduce kernel's gradients, in place (the kernel's
  // input is its output's memory), each a parameter's.
  // A packed parameter is one member of its bucket, with its gradient.
  std::map<int, int> paramOfGrad; // gradient storage -> parameter storage
  for (const rt::Param &p : plan.params)
    paramOfGrad[storageOf(p.grad)] = storageOf(p.buffer);
  std::vector<std::vector<int>> buckets; // gradient storages
  std::set<int> bucketed;
  for (const rt::Kernel &k : plan.kernels) {
    if (k.op != rt::OpKind::AllReduce)
      continue;
    buckets.emplace_back();
    for (size_t i = 0; i < k.outputs.size(); ++i) {
      int out = storageOf(k.outputs[i]);
      auto it = paramOfGrad.find(out);
      if (it == paramOfGrad.end() || storageOf(k.inputs[i]) != out ||
          plan.buffers[out].dtype != rt::DType::F32)
        return func.emitError("shard = gradients needs every gradient "
                              "written in place for its bucket, as gt-fuse "
                              "plans them (bucket ")
               << buckets.size() - 1 << "'s gradient " << i
               << " is not); use shard = optimizer, or drop --no-fuse";
      buckets.back().push_back(out);
      bucketed.insert(out);
    }
  }
  for (const rt::Param &p : plan.params)
    if (!bucketed.count(storageOf(p.grad)))
      return func.emitError("shard = gradients: the gradient of '")
             << p.name << "' is in no gt-bucket bucket; run gt-bucket first";
  // The parameter region, a bucket after another; each group mirrors its
  // bucket's range of it (alignment gaps included, which no kernel writes
  // and the runtime does not reduce).
  int64_t cursor = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t lo = cursor;
    int64_t first = INT64_MAX;
    std::vector<std::pair<int, int64_t>> members;
    for (int grad : buckets[b]) {
      rt::Buffer &param = plan.buffers[paramOfGrad.at(grad)];
      param.offset = cursor;
      members.push_back({grad, cursor - lo});
      first = std::min(first, defAt[grad]);
      cursor += alignUp(std::max<int64_t>(1, param.slots()), kParamAlign);
    }
    FailureOr<int> group = addBuffer(Value(), MemRegion::Temp,
                                     "bucket " + std::to_string(b) +
                                         " gradients");
    if (failed(group))
      return failure();
    plan.buffers[*group].dtype = rt::DType::F32;
    plan.buffers[*group].shape = {cursor - lo};
    // Live to the step's end: its reduction runs on the communication
    // stream, which the step joins at its end.
    defAt[*group] = first;
    lastUse[*group] = static_cast<int64_t>(plan.kernels.size());
    for (auto [grad, at] : members) {
      plan.buffers[grad].region = MemRegion::Temp;
      inGroup[grad] = {*group, at};
    }
  }
  plan.regionSize[MemRegion::Param] = cursor;
  plan.regionSize[MemRegion::Grad] = 0;
  plan.shardRanks = shardRanks;
  return success();
}

FailureOr<rt::Plan> PlanBuilder::build() {
  plan.kind = func->hasAttr(kStepAttrName)     ? "step"
              : func->hasAttr(kDecodeAttrName) ? "decode"
                                               : "eval";
  plan.model = func.getSymName().str();
  if (plan.kind == "step" && StringRef(plan.model).ends_with("_step"))
    plan.model.resize(plan.model.size() - 5); // the model's own name
  for (MemRegion r : {MemRegion::Param, MemRegion::Grad, MemRegion::Input,
                      MemRegion::Const, MemRegion::Temp, MemRegion::State})
    cursor[r] = 0;
  findInPlaceGradients();
  for (Operation &op : func.getBody().front().without_terminator()) {
    LogicalResult added = success();
    if (auto p = dyn_cast<ParamOp>(op))
      added = addParam(p);
    else if (isa<InputOp, LabelOp>(op))
      added = addFeed(op);
    else if (isa<ConstantOp, PositionsOp>(op))
      added = addConstant(op);
    else if (auto s = dyn_cast<StateOp>(op))
      added = failure(failed(
          addBuffer(s.getResult(), MemRegion::State, s.getName().str())));
    else if (auto g = dyn_cast<GradientOp>(op))
      added = addGradient(g);
    else
      added = addComputing(op);
    if (failed(added))
      return failure();
  }
  if (failed(
          finish(cast<func::ReturnOp>(func.getBody().front().getTerminator()))))
    return failure();
  return plan;
}

void PlanBuilder::findInPlaceGradients() {
  // Gradients that can be written in place: a value computed by a kernel,
  // read by nothing but its gt.gradient. Under such a value, what it is
  // computed over in place can be the gradient instead, when that too is
  // computed by a kernel and read by nothing else: the operand of a
  // gt.all_reduce (gt-bucket reduces it in place), the value a scatter_add
  // region scatters onto (a tied embedding's dW). That value is then the
  // gradient, written in place by its kernel, and the results above it are
  // views of it (viewOf).
  auto computed = [](Value v) {
    Operation *def = v.getDefiningOp();
    return def && v.hasOneUse() &&
           !isa<ParamOp, ConstantOp, InputOp, LabelOp, PositionsOp>(def);
  };
  auto under = [&](Value v) -> Value {
    if (!views)
      return {};
    if (auto reduce = v.getDefiningOp<AllReduceOp>())
      return reduce.getGrads()[cast<OpResult>(v).getResultNumber()];
    auto f = v.getDefiningOp<FusedOp>();
    if (!f || f.getKind() != "scatter_add")
      return {};
    auto add = cast<AddOp>(f.getYield().getValues()[0].getDefiningOp());
    auto arg = dyn_cast<BlockArgument>(
        isa<BlockArgument>(add.getLhs()) ? add.getLhs() : add.getRhs());
    return f.getInputs()[arg.getArgNumber()];
  };
  func.walk([&](GradientOp g) {
    Value v = g.getGrad();
    if (!computed(v))
      return;
    inPlaceGrad[v] = g;
    for (Value u = under(v); u && computed(u) && !u.getDefiningOp<ReshapeOp>();
         u = under(u)) {
      inPlaceGrad[u] = g;
      viewOf[v] = u;
      v = u;
    }
  });
}

LogicalResult PlanBuilder::addParam(ParamOp p) {
  FailureOr<int> id = addBuffer(p, MemRegion::Param, p.getName().str());
  if (failed(id))
    return failure();
  auto add = [&](StringRef name, int buffer) {
    paramIndex[name] = static_cast<int>(plan.params.size());
    rt::Param param;
    param.name = name.str();
    param.buffer = buffer;
    param.init = p.getInit().str();
    for (Attribute a : p.getArgs())
      param.args.push_back(cast<FloatAttr>(a).getValueAsDouble());
    plan.params.push_back(std::move(param));
  };
  std::optional<ArrayAttr> parts = p.getParts();
  if (!parts) {
    add(p.getName(), *id);
    return success();
  }
  // A packed parameter: the plan's parameters are its parts, each a view
  // of its rows (drawn, saved and loaded under its own name).
  Packed &pack = packed[p.getName()];
  pack.buffer = *id;
  const rt::Buffer whole = plan.buffers[*id];
  const int64_t rowBytes =
      whole.elements() / whole.shape[0] * rt::dtypeBytes(whole.dtype);
  int64_t row = 0;
  for (auto [name, rows] : llvm::zip(*parts, *p.getPartRows())) {
    StringRef part = cast<StringAttr>(name).getValue();
    if (row * rowBytes % 4 != 0)
      return p.emitOpError("part '")
             << part << "' does not start at a 4-byte boundary";
    FailureOr<int> view = addBuffer(Value(), MemRegion::Param, part.str());
    if (failed(view))
      return failure();
    rt::Buffer &b = plan.buffers[*view];
    b.dtype = whole.dtype;
    b.shape = whole.shape;
    b.shape[0] = cast<IntegerAttr>(rows).getInt();
    b.viewOf = *id;
    b.offset = row * rowBytes / 4;
    row += b.shape[0];
    pack.parts.push_back(static_cast<int>(plan.params.size()));
    add(part, *view);
  }
  return success();
}

LogicalResult PlanBuilder::addFeed(Operation &op) {
  StringRef name = isa<InputOp>(op) ? cast<InputOp>(op).getName()
                                    : cast<LabelOp>(op).getName();
  FailureOr<int> id = addBuffer(op.getResult(0), MemRegion::Input, name.str());
  if (failed(id))
    return failure();
  plan.feeds.push_back({name.str(), *id, isa<LabelOp>(op)});
  return success();
}

LogicalResult PlanBuilder::addConstant(Operation &op) {
  FailureOr<int> id = addBuffer(op.getResult(0), MemRegion::Const,
                                op.getName().stripDialect().str());
  if (failed(id))
    return failure();
  rt::Constant c;
  c.buffer = *id;
  if (auto pos = dyn_cast<PositionsOp>(op)) {
    for (uint64_t i = 0; i < pos.getLength(); ++i)
      c.values.push_back(static_cast<double>(i));
  } else {
    auto dense = dyn_cast<DenseElementsAttr>(cast<ConstantOp>(op).getValue());
    if (!dense)
      return op.emitError("the plan supports dense constants only");
    if (dense.isSplat()) {
      c.values.push_back(
          isa<FloatType>(dense.getElementType())
              ? dense.getSplatValue<APFloat>().convertToDouble()
              : double(dense.getSplatValue<APInt>().getSExtValue()));
    } else if (isa<FloatType>(dense.getElementType())) {
      for (APFloat v : dense.getValues<APFloat>())
        c.values.push_back(v.convertToDouble());
    } else {
      for (APInt v : dense.getValues<APInt>())
        c.values.push_back(double(v.getSExtValue()));
    }
  }
  plan.constants.push_back(std::move(c));
  if (op.hasAttr(kLossGradAttrName))
    plan.lossScale = *id;
  return success();
}

LogicalResult PlanBuilder::addGradient(GradientOp g) {
  auto it = paramIndex.find(g.getName());
  auto pack = packed.find(g.getName());
  if (it == paramIndex.end() && pack == packed.end())
    return g.emitError("gradient of unknown parameter '") << g.getName() << "'";
  // A packed parameter's gradient is one buffer too, and its parts' are
  // views of their rows of it.
  const int param = pack != packed.end() ? pack->second.buffer
                                         : plan.params[it->second].buffer;
  int &grad =
      pack != packed.end() ? pack->second.grad : plan.params[it->second].grad;
  if (grad >= 0)
    return g.emitError("parameter '") << g.getName() << "' has two gradients";
  if (inPlaceGrad.count(g.getGrad())) {
    grad = storageOf(bufferOf(g.getGrad()));
  } else {
    FailureOr<int> id =
        addBuffer(Value(), MemRegion::Grad, "grad " + g.getName().str());
    if (failed(id))
      return failure();
    plan.buffers[*id].shape = plan.buffers[param].shape;
    grad = *id;
    rt::Kernel copy;
    copy.op = rt::OpKind::Copy;
    copy.inputs = {bufferOf(g.getGrad())};
    copy.outputs = {*id};
    int index = static_cast<int>(plan.kernels.size());
    int from = storageOf(copy.inputs[0]);
    lastUse[from] = std::max<int64_t>(lastUse[from], index);
    defAt[*id] = index;
    plan.kernels.push_back(std::move(copy));
  }
  if (pack == packed.end())
    return success();
  for (int i : pack->second.parts) {
    rt::Param &part = plan.params[i];
    FailureOr<int> view =
        addBuffer(Value(), MemRegion::Grad, "grad " + part.name);
    if (failed(view))
      return failure();
    rt::Buffer &b = plan.buffers[*view];
    b.dtype = plan.buffers[grad].dtype;
    b.shape = plan.buffers[part.buffer].shape;
    b.viewOf = grad;
    b.offset = plan.buffers[part.buffer].offset; // its rows' slots
    part.grad = *view;
  }
  return success();
}

LogicalResult PlanBuilder::addComputing(Operation &op) {
  // A reshape moves no data: a view of its operand (unless the gradient
  // region wants the value in place).
  if (auto reshape = dyn_cast<ReshapeOp>(op);
      reshape && views && !inPlaceGrad.count(reshape.getResult())) {
    addView(reshape.getResult(), bufferOf(reshape.getInput()));
    return success();
  }
  // So does a slice that is one contiguous, aligned block of a temporary.
  if (auto slice = dyn_cast<SliceOp>(op);
      slice && views && !inPlaceGrad.count(slice.getResult())) {
    int of = bufferOf(slice.getInput());
    std::optional<int64_t> at = contiguousSlice(slice);
    if (at && plan.buffers[storageOf(of)].region == MemRegion::Temp) {
      addView(slice.getResult(), of, "slice", *at);
      return success();
    }
  }
  // A computing op: results are temporaries, or gradients in place. A
  // fusion region's result is named by the op inside that computes it.
  auto fusedOp = dyn_cast<FusedOp>(op);
  Value overLogits = inPlaceLoss(fusedOp);
  if (overLogits)
    addView(fusedOp.getResult(1), bufferOf(overLogits), "cross_entropy_grad");
  for (Value r : op.getResults())
    if (Value of = viewOf.lookup(r))
      addView(r, bufferOf(of), op.getName().stripDialect().str());
  // A KV cache's update is the cache, written in place.
  if (auto update = dyn_cast<CacheUpdateOp>(op))
    buffers[update.getResult()] = bufferOf(update.getCache());
  for (Value r : op.getResults()) {
    if (buffers.count(r))
      continue;
    auto g = inPlaceGrad.find(r);
    Operation *namer =
        fusedOp ? fusedOp.getYield()
                      .getValues()[cast<OpResult>(r).getResultNumber()]
                      .getDefiningOp()
                : &op;
    FailureOr<int> id =
        addBuffer(r, g == inPlaceGrad.end() ? MemRegion::Temp : MemRegion::Grad,
                  namer->getName().stripDialect().str());
    if (failed(id))
      return failure();
  }
  if (fusedOp && failed(addFusedBody(fusedOp)))
    return failure();
  if (failed(addKernel(&op)))
    return failure();
  if (fusedOp && fusedOp.getKind() == "classifier" &&
      failed(addClassifierChunk(fusedOp)))
    return failure();
  return success();
}

LogicalResult PlanBuilder::finish(func::ReturnOp ret) {
  // Results: the loss, then an optional accuracy. They must outlive the step.
  if (ret.getNumOperands() < 1 || ret.getNumOperands() > 2)
    return func.emitError("a plan's function returns the loss and, "
                          "optionally, the accuracy");
  std::vector<int> outs;
  for (Value v : ret.getOperands()) {
    if (!buffers.count(v))
      return func.emitError("the returned value is not computed by a kernel");
    outs.push_back(bufferOf(v));
    lastUse[storageOf(outs.back())] = INT_MAX;
  }
  plan.loss = outs[0];
  plan.accuracy = outs.size() > 1 ? outs[1] : -1;

  // A step's gradients share the temporaries' memory, as the activations
  // die in the backward pass that writes them (under ZeRO-2 their groups
  // do instead).
  if (plan.kind == "step" && shardRanks <= 1 && !gradientsApart &&
      !plan.params.empty()) {
    plan.gradsInTemp = 0;
    layOutParamsForGradsInTemp();
  }
  // Gradients live at their parameter's offset; every parameter has one.
  for (rt::Param &p : plan.params) {
    if (plan.kind == "step" && p.grad < 0)
      return func.emitError("parameter '") << p.name << "' has no gradient";
    if (p.grad < 0)
      continue;
    if (plan.buffers[p.grad].elements() != plan.buffers[p.buffer].elements())
      return func.emitError("the gradient of '")
             << p.name << "' does not have the parameter's shape";
    plan.buffers[p.grad].offset = plan.buffers[p.buffer].offset;
  }
  for (const auto &pack : packed)
    if (pack.second.grad >= 0)
      plan.buffers[pack.second.grad].offset =
          plan.buffers[pack.second.buffer].offset;
  plan.regionSize[MemRegion::Param] = cursor[MemRegion::Param];
  plan.regionSize[MemRegion::Grad] =
      plan.kind == "step" ? cursor[MemRegion::Param] : 0;
  if (shardRanks > 1 && plan.kind == "step" && failed(groupGradients()))
    return failure();
  plan.regionSize[MemRegion::Input] = cursor[MemRegion::Input];
  plan.regionSize[MemRegion::Const] = cursor[MemRegion::Const];
  if (cursor[MemRegion::State] > 0)
    plan.regionSize[MemRegion::State] = cursor[MemRegion::State];
  if (localSize > 0)
    plan.regionSize[MemRegion::Local] = localSize;
  placeParamCopies();
  placeTemporaries();
  // Views take their memory's place (a gradient's is set above), a slice
  // its slots into it.
  for (rt::Buffer &b : plan.buffers)
    if (b.viewOf >= 0) {
      b.region = plan.buffers[b.viewOf].region;
      b.offset += plan.buffers[b.viewOf].offset;
    }
  return success();
}

} // namespace

FailureOr<gtc::rt::Plan> gtc::buildPlan(func::FuncOp func, TrainOp train,
                                        bool views, int64_t shardRanks,
                                        bool gradientsApart,
                                        int64_t classifierChunkBytes) {
  FailureOr<rt::Plan> plan = PlanBuilder(func, views, shardRanks,
                                         gradientsApart, classifierChunkBytes)
                                 .build();
  if (failed(plan))
    return failure();
  if (train) {
    FailureOr<rt::TrainConfig> config = trainConfig(train);
    if (failed(config))
      return failure();
    plan->config = std::move(*config);
  }
  // The batch is the inputs' first dimension (not that of a view of one,
  // which may fold it into another: x[B, 128, 8] viewed as [128 B, 8]).
  for (const rt::Buffer &b : plan->buffers)
    if (b.region == MemRegion::Input && b.viewOf < 0 && !b.shape.empty())
      plan->batch = std::max(plan->batch, b.shape[0]);
  return plan;
}

FailureOr<gtc::rt::TrainConfig> gtc::trainConfig(TrainOp train) {
  rt::TrainConfig c;
  auto named = [&](StringRef what, StringRef text, auto &out) -> LogicalResult {
    if (rt::parse(text.str(), out))
      return success();
    return train.emitError("unknown ") << what << " '" << text << "'";
  };
  auto i64 = [&](StringRef key, auto &out) {
    if (auto a = train->getAttrOfType<IntegerAttr>(key))
      out = a.getInt();
  };
  i64("batch", c.batch);
  i64("epochs", c.epochs);
  i64("steps", c.steps);
  i64("seed", c.seed);
  i64("log_every", c.logEvery);
  i64("eval_every", c.evalEvery);
  i64("sample_every", c.sampleEvery);
  if (auto a = train->getAttrOfType<BoolAttr>("shuffle"))
    c.shuffle = a.getValue();
  if (auto a = train->getAttrOfType<FloatAttr>("grad_clip"))
    c.gradClip = a.getValueAsDouble();
  auto source = [&](StringRef key, rt::TrainConfig::Source &s) {
    auto d = train->getAttrOfType<DictionaryAttr>(key);
    if (!d)
      return;
    auto str = [&](StringRef k) {
      auto a = d.getAs<StringAttr>(k);
      return a ? a.str() : std::string();
    };
    s.kind = str("kind");
    s.images = str("images");
    s.labels = str("labels");
    s.path = str("path");
    if (auto a = d.getAs<FloatAttr>("scale"))
      s.scale = a.getValueAsDouble();
    if (auto a = d.getAs<IntegerAttr>("seq"))
      s.seq = a.getInt();
  };
  source("data", c.data);
  source("eval", c.eval);
  if (auto o = train->getAttrOfType<DictionaryAttr>("optimizer")) {
    auto f64 = [&](StringRef k, double &out) {
      if (auto a = o.getAs<FloatAttr>(k))
        out = a.getValueAsDouble();
    };
    if (failed(named("optimizer", o.getAs<StringAttr>("name").getValue(),
                     c.optimizer)))
      return failure();
    c.weightDecay = c.optimizer == rt::OptimizerKind::AdamW ? 0.01 : 0.0;
    f64("lr", c.lr);
    f64("eps", c.eps);
    f64("weight_decay", c.weightDecay);
    f64("momentum", c.momentum);
    f64("dampening", c.dampening);
    if (auto a = o.getAs<BoolAttr>("nesterov"))
      c.nesterov = a.getValue();
    if (auto betas = o.getAs<ArrayAttr>("betas"); betas && betas.size() == 2) {
      c.beta1 = cast<FloatAttr>(betas[0]).getValueAsDouble();
      c.beta2 = cast<FloatAttr>(betas[1]).getValueAsDouble();
    }
  }
  if (auto s = train->getAttrOfType<DictionaryAttr>("schedule")) {
    if (failed(named("schedule", s.getAs<StringAttr>("name").getValue(),
                     c.schedule)))
      return failure();
    if (auto a = s.getAs<IntegerAttr>("warmup"))
      c.warmup = a.getInt();
    if (auto a = s.getAs<FloatAttr>("final"))
      c.final = a.getValueAsDouble();
  }
  return c;
}
