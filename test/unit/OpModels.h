//===- OpModels.h - Small models that exercise every op --------*- C++ -*-===//
//
// Shared by the float64 gradient checks (GradientTest.cpp) and the GPU-vs-CPU
// comparisons (test/gpu/GpuTest.cpp): each model routes its parameters
// through some ops so that their forward and backward kernels run.
//===----------------------------------------------------------------------===//

#ifndef GTC_TEST_OPMODELS_H
#define GTC_TEST_OPMODELS_H

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace gtc::test {

struct OpModel {
  std::string name;
  std::string source;
  int64_t batch = 2;      ///< batch size to compile at
  int32_t intRange = 3;   ///< i32 feeds are drawn from [0, intRange)
  int64_t samples = 24;   ///< gradient elements checked per parameter
  /// gtc-gpu-check's tolerance at tf32 (0: its default, 5e-3). The CPU
  /// computes in fp32, so a ReLU whose input is within tf32's rounding of 0
  /// may differ, and with it a whole row of the first layer's gradient.
  double tf32Tolerance = 0;
  /// Whether GradientTest's central differences apply: not when a step of
  /// 1e-5 moves many ReLU inputs across 0 (a model of thousands of ReLUs).
  bool finiteDifferences = true;
};

/// GoogleTest prints a model by its name.
inline void PrintTo(const OpModel &m, std::ostream *os) { *os << m.name; }

inline const std::vector<OpModel> &opModels() {
  static const std::vector<OpModel> models = {
      {"ElementwiseWithBroadcasting", R"(model m {
    input x: f32[B, 3, 4]
    param a: f32[3, 4] = normal(1.0)
    param b: f32[4] = normal(1.0)
    param c: f32[1, 4] = normal(1.0)
    loss = mean((a * x + b) / (b * b + 2) - a * c + x / (c * c + 1) - b)
  })", 2, 3, 24},
      {"Negation", R"(model m {
    input x: f32[B, 4]
    param a: f32[4] = normal(1.0)
    loss = mean(-(a * x) * a)
  })", 2, 3, 24},
      {"Activations", R"(model m {
    input x: f32[B, 5]
    param a: f32[5] = normal(1.0)
    h = relu(a * x) + tanh(a * x) + sigmoid(a - x) + exp(a * 0.5)
    h = h + log(a * a + 1) + sqrt(a * a + 0.5) + gelu(a * x)
    h = h + gelu(x - a, approximate: true) + silu(a * x - 0.5)
    loss = mean(h * x)
  })", 2, 3, 24},
      {"Softmax", R"(model m {
    input x: f32[B, 3, 4]
    param a: f32[3, 4] = normal(1.0)
    loss = mean(softmax(a * x) * x) + mean(softmax(a + x, axis: 1) * x)
  })", 2, 3, 24},
      {"MatmulTransposesAndBatches", R"(model m {
    input x: f32[B, 3, 4]
    param w: f32[4, 5] = normal(1.0)
    param v: f32[5, 4] = normal(1.0)
    param u: f32[4, 3] = normal(1.0)
    param p: f32[2, 4, 3] = normal(1.0)
    param q: f32[2, 4, 5] = normal(1.0)
    h = matmul(x, w) + matmul(x, v, transpose_b: true)
    g = matmul(u, x, transpose_a: true, transpose_b: true)
    r = matmul(p, q, transpose_a: true)
    loss = mean(h * h) + mean(g) + mean(r * r)
  })", 2, 3, 24},
      {"LinearRanksAndBias", R"(model m {
    input x: f32[B, 3, 4]
    input z: f32[B, 4]
    h = linear(x, 6)
    g = linear(z, 3, bias: false)
    loss = mean(h * h) + mean(g * g)
  })", 2, 3, 24},
      {"LayerNorm", R"(model m {
    input x: f32[B, 3, 8]
    param a: f32[8] = normal(1.0)
    h = layernorm(x * a, eps: 1e-3)
    param w: f32[8] = normal(1.0)
    loss = mean(h * w * x)
  })", 2, 3, 24},
      // The residual sum feeds the norm and the loss (stored on the way: a
      // norm region on the GPU); rows of 8 and of 6 (a vector load of 4
      // columns, and single columns).
      {"RmsNorm", R"(model m {
    input x: f32[B, 3, 8]
    input z: f32[B, 6]
    param a: f32[8] = normal(1.0)
    s = x * a + x
    h = rmsnorm(s, eps: 1e-3)
    g = rmsnorm(z * z, name: "final")
    param w: f32[8] = normal(1.0)
    loss = mean(h * w * x) + mean(s * s) + mean(g * z)
  })", 2, 3, 24},
      // The norm of a model input, with a residual add: the gradient's norm
      // region stores no input gradient, only the weight's column sums.
      {"RmsNormOfAnInput", R"(model m {
    input x: f32[B, 3, 8]
    h = x + linear(rmsnorm(x, name: "n"), 8, bias: false)
    loss = mean(h * h)
  })", 2, 3, 24},
      // Both pair conventions, rotate-half and interleaved, over 5
      // positions of 3 heads of 8 features (head_dim 4 in the second).
      {"Rope", R"(model m {
    input x: f32[B, 5, 24]
    h = linear(x, 24)
    q = rope(reshape(h, (-1, 5, 3, 8)), theta: 100.0)
    k = rope(reshape(h * h, (-1, 5, 6, 4)), interleaved: true)
    loss = mean(reshape(q, (-1, 5, 24)) * x) + mean(reshape(k, (-1, 5, 24)) * h)
  })", 2, 3, 24},
      // Blocks: slices at offsets along the last and a middle axis, and
      // their concatenation (pads at offsets, added).
      {"SliceAndConcat", R"(model m {
    input x: f32[B, 4, 6]
    param w: f32[4, 6] = normal(1.0)
    h = x * w
    a = slice(h, 1, 4)
    b = slice(h, -2, 6)
    c = slice(h, 0, 3, axis: 1)
    j = concat((b, a * a, slice(h, 0, 1)), axis: -1)
    k = concat((h, w * x), axis: 1) * concat((x, x), axis: 1)
    loss = mean(j * x) + mean(k) + mean(c * c)
  })", 2, 3, 24},
      // attention(q, k, v): grouped-query (4 heads over 2 K/V heads) after
      // rope, and a given scale without the causal mask.
      {"GroupedQueryAttention", R"(model m {
    input x: f32[B, 5, 8]
    q = reshape(linear(x, 8, bias: false), (-1, 5, 4, 2))
    k = reshape(linear(x, 4, bias: false), (-1, 5, 2, 2))
    v = reshape(linear(x, 4, bias: false), (-1, 5, 2, 2))
    y = attention(rope(q), rope(k), v)
    z = attention(q, k, v, causal: false, scale: 0.3)
    loss = mean(reshape(y, (-1, 5, 8)) * x) + mean(z * z)
  })", 2, 3, 24},
      {"CausalAndFullAttention", R"(model m {
    input x: f32[B, 5, 8]
    h = attention(x, heads: 2, causal: true)
    g = attention(x, heads: 4, causal: false)
    loss = mean(h * x) + mean(g * g)
  })", 2, 3, 24},
      // Heads of 64 and 128 over 83 positions (a full and a partial tile of
      // 64, and T not a multiple of 4: the Hopper dk, dv kernel's copies of
      // lse and delta one float at a time): in bf16 and fp16 the tensor-core
      // kernels (FlashAttention.cpp).
      // Sums, not means: gradients of order 1, as loss scaling makes them
      // in fp16 training (the fp16 score gradients of a mean, ~1e-6, would
      // be subnormal).
      {"TensorCoreAttention", R"(model m {
    input x: f32[B, 83, 8]
    h = attention(linear(x, 64), heads: 1, causal: true)
    g = attention(linear(x, 128), heads: 1, causal: false)
    loss = sum(h * h) + sum(g * g)
  })", 2, 3, 8},
      // Several query and key tiles of every flash kernel (a warp's rows
      // fully masked on the causal diagonal, a partial last tile), heads of
      // 64 and 128.
      {"TensorCoreAttentionTiles", R"(model m {
    input x: f32[B, 200, 8]
    h = attention(linear(x, 128), heads: 2, causal: true)
    g = attention(linear(x, 128), heads: 1, causal: false)
    loss = sum(h * h) + sum(g * g)
  })", 2, 3, 8},
      // The other two: heads of 64 without the mask, 128 with it.
      {"TensorCoreAttentionTilesSwapped", R"(model m {
    input x: f32[B, 200, 8]
    h = attention(linear(x, 128), heads: 2, causal: false)
    g = attention(linear(x, 128), heads: 1, causal: true)
    loss = sum(h * h) + sum(g * g)
  })", 2, 3, 8},
      // Grouped-query (3 query heads a key head, heads of 64, causal) and
      // multi-query (heads of 128, full) attention on the tensor-core
      // kernels: the dk, dv kernel sums over a key head's query heads.
      {"TensorCoreGroupedQueryAttention", R"(model m {
    input x: f32[B, 200, 8]
    q = reshape(linear(x, 192, bias: false), (-1, 200, 3, 64))
    k = reshape(linear(x, 64, bias: false), (-1, 200, 1, 64))
    v = reshape(linear(x, 64, bias: false), (-1, 200, 1, 64))
    y = attention(q, k, v)
    q2 = reshape(linear(x, 256, bias: false), (-1, 200, 2, 128))
    k2 = reshape(linear(x, 128, bias: false), (-1, 200, 1, 128))
    z = attention(q2, k2, k2, causal: false)
    loss = sum(y * y) + sum(z * z)
  })", 2, 3, 8},
      // Attention over rope(q) and rope(k) on the tensor-core kernels
      // (grouped-query heads of 64; heads of 128 with interleaved pairs and
      // another theta): in 16-bit the gradient's kernels turn dq and dk
      // back as they store them (gt-fuse's "attention_grad" region). The
      // second's projections become one over packed heads [B, T, 6, 128]
      // (gt-pack-projections); the first's stay apart (k is read again).
      {"TensorCoreRopeAttention", R"(model m {
    input x: f32[B, 200, 8]
    q = reshape(linear(x, 192, bias: false), (-1, 200, 3, 64))
    k = reshape(linear(x, 64, bias: false), (-1, 200, 1, 64))
    v = reshape(linear(x, 64, bias: false), (-1, 200, 1, 64))
    y = attention(rope(q), rope(k), v)
    q2 = reshape(linear(x, 256, bias: false), (-1, 200, 2, 128))
    k2 = reshape(linear(x, 256, bias: false), (-1, 200, 2, 128))
    v2 = reshape(linear(x, 256, bias: false), (-1, 200, 2, 128))
    z = attention(rope(q2, interleaved: true, theta: 500.0), rope(k2, interleaved: true, theta: 500.0), v2, causal: false)
    loss = sum(y * y) + sum(z * z) + sum(k * k)
  })", 2, 3, 8},
      // Dropout's gradient keeps the forward's mask (step 0, seed 0 on both
      // devices); two dropouts draw different masks.
      {"Dropout", R"(model m {
    input x: f32[B, 3, 8]
    h = dropout(linear(x, 8), 0.3)
    loss = mean(dropout(h, 0.5) * h + dropout(x, 0.1))
  })", 2, 3, 24},
      {"EmbeddingAndCrossEntropy", R"(model m {
    input t: i32[B, 4]
    label y: i32[B, 4]
    h = embedding(t, 5, dim: 6) + embedding(positions(4), 4, dim: 6)
    loss = cross_entropy(linear(h, 5), y)
  })", 3, 5, 24},
      {"ReductionsTransposeReshape", R"(model m {
    input x: f32[B, 3, 4]
    param a: f32[3, 4] = normal(1.0)
    h = a * x
    s = sum(h, axis: -1) + mean(h, axis: (-1,))
    k = mean(h, axis: (0, 2), keepdim: true)
    t = transpose(h) * transpose(x)
    r = reshape(h, (-1, 2)) * reshape(x, (-1, 2))
    loss = mean(s * s) + sum(k * k) + mean(t) + sum(r) + mean(h)
  })", 2, 3, 24},
      // More rows than one block takes (1536 > kOneBlockRows) and rows of a
      // multiple of 8: the loss region's grid of row blocks, 16-byte loads,
      // and in bf16 the gradient written over the bf16 logits.
      {"ClassifierManyRows", R"(model m {
    input t: i32[B, 128]
    label y: i32[B, 128]
    h = embedding(t, 1032, dim: 8, std: 0.5)
    loss = cross_entropy(linear(h, 1032, bias: false), y)
  })", 12, 1032, 12},
      // Column means over more rows (40 x 128 = 5120) than one thread a
      // column walks alone: the column-tile kernel (rows of 16 bytes).
      {"ColumnSumsManyRows", R"(model m {
    input x: f32[B, 128, 8]
    h = gelu(linear(x, 48), approximate: true)
    c = mean(h, axis: (0, 1))
    loss = mean(linear(h, 8) * x) + mean(c * c)
  })", 40, 3, 12},
      // tanh and GELU gradients with the column sums of the bias gradients
      // over 1024 rows: elementwise kernels over chunks of rows, whole rows
      // of 256 columns in 16-byte accesses (8 bf16 or 4 f32 a thread), and
      // tiles of 32 columns of the 50, one element a lane (the GELU's input
      // is not saved by cuBLASLt, whose rows are multiples of 8 elements).
      {"ColumnSumsOfGradients", R"(model m {
    input x: f32[B, 64, 32]
    label y: i32[B, 64]
    h = tanh(linear(x, 256))
    g = gelu(linear(h, 50), approximate: true)
    loss = cross_entropy(linear(g, 10), y)
  })", 16, 10, 12},
      // A tied classifier (a "classifier" region) over 500 rows: with
      // GTC_CLASSIFIER_CHUNK_BYTES=65536 (test/gpu/run.sh) the GPU runs it in
      // chunks of 128 rows and a last one of 116.
      {"ClassifierChunks", R"(model m {
    input t: i32[B, 100]
    label y: i32[B, 100]
    param wte: f32[520, 16] = normal(0.5)
    h = embedding(t, wte)
    loss = cross_entropy(matmul(layernorm(h), transpose(wte)), y)
  })", 5, 520, 12},
      {"TiedWeights", R"(model m {
    input t: i32[B, 3]
    label y: i32[B, 3]
    param wte: f32[6, 4] = normal(0.5)
    x = embedding(t, wte)
    loss = cross_entropy(matmul(layernorm(x), transpose(wte)), y)
  })", 2, 6, 24},
      {"WholeMlp", R"(model mlp {
    input x: f32[B, 12]
    label y: i32[B]
    h = relu(linear(x, 16))
    h = relu(linear(h, 16))
    loss = cross_entropy(linear(h, 4), y)
  })", 4, 4, 24},
      // GEMMs of gtc's small-GEMM kernel with K split over clusters (K =
      // 301, 520: uneven slices), several column tiles, K not a multiple
      // of the vector width, ReLU gradients and column sums in the dX
      // GEMM's epilogue. At tf32 a few of its 8000 first-layer ReLU inputs
      // lie within the rounding of a 301-term dot product of 0 (measured on
      // an H100: the worst gradient, fc1.weight's, 1.0e-2 off the fp32 CPU;
      // 2.9e-7 at fp32). For the same reason central differences of its
      // 28,800 ReLUs cross kinks: its gradients are checked on the GPU
      // against the CPU only (the smaller MLPs check the rule itself).
      {"WideMlp", R"(model wide {
    input x: f32[B, 301]
    label y: i32[B]
    h = relu(linear(x, 200))
    h = relu(linear(h, 520))
    loss = cross_entropy(linear(h, 7), y)
  })", 40, 7, 24, 3e-2, false},
      {"WholeTwoLayerCharGpt", R"(model char_gpt {
    let V = 11, T = 6, D = 8, H = 2, L = 2
    input  tokens: i32[B, T]
    label  targets: i32[B, T]
    def block(x) {
      x = x + attention(layernorm(x, name: "ln_1"), heads: H, causal: true, name: "attn")
      return x + linear(gelu(linear(layernorm(x, name: "ln_2"), 4 * D, name: "mlp.fc"), approximate: true), D, name: "mlp.proj")
    }
    x = embedding(tokens, V, dim: D, std: 0.5, name: "wte") + embedding(positions(T), T, dim: D, std: 0.5, name: "wpe")
    repeat L { x = block(x) }
    loss = cross_entropy(linear(layernorm(x, name: "ln_f"), V, bias: false, name: "lm_head"), targets)
  })", 2, 11, 12},
      // examples/llama.gt in small: RMSNorm, RoPE, grouped-query attention
      // and a SwiGLU MLP, no biases. gt-fuse computes silu(g) again in the
      // backward (in the kernel of g's silu gradient) and adds the input
      // gradients of q, k, v and of gate, up as cuBLASLt's C of the next
      // dX GEMM.
      {"WholeTwoLayerLlama", R"(model llama {
    let V = 11, T = 6, D = 16, H = 4, KV = 2, FF = 24, L = 2
    input  tokens: i32[B, T]
    label  targets: i32[B, T]
    def attn(x) {
      q = reshape(linear(x, D, bias: false, name: "q_proj"), (-1, T, H, D / H))
      k = reshape(linear(x, KV * D / H, bias: false, name: "k_proj"), (-1, T, KV, D / H))
      v = reshape(linear(x, KV * D / H, bias: false, name: "v_proj"), (-1, T, KV, D / H))
      y = attention(rope(q), rope(k), v, causal: true)
      return linear(reshape(y, (-1, T, D)), D, bias: false, name: "o_proj")
    }
    def mlp(x) {
      g = silu(linear(x, FF, bias: false, name: "gate_proj"))
      return linear(g * linear(x, FF, bias: false, name: "up_proj"), D, bias: false, name: "down_proj")
    }
    def block(x) {
      x = x + attn(rmsnorm(x, name: "input_layernorm"))
      return x + mlp(rmsnorm(x, name: "post_attention_layernorm"))
    }
    x = embedding(tokens, V, dim: D, std: 0.5, name: "embed_tokens")
    repeat L { x = block(x) }
    loss = cross_entropy(linear(rmsnorm(x, name: "norm"), V, bias: false, name: "lm_head"), targets)
  })", 2, 11, 12},
      // Gated linear units: gt-pack-projections makes each gated product
      // one linear over both weights and gt.glu (GeGLU's tanh form on 5
      // columns, which the CUDA kernel reads one at a time; SwiGLU, its
      // product in the other order, on 8).
      {"GatedLinearUnits", R"(model m {
    input x: f32[B, 3, 6]
    h = gelu(linear(x, 5, bias: false, name: "a.gate"), approximate: true) * linear(x, 5, bias: false, name: "a.up")
    z = linear(x, 8, bias: false, name: "b.up") * silu(linear(x, 8, bias: false, name: "b.gate"))
    loss = mean(linear(h, 3, bias: false, name: "a.down") * slice(x, 0, 3)) + mean(z * z)
  })", 2, 3, 24},
      // A linear with a bias and a tanh GELU saving its input, in whole
      // 128 x 128 tiles over K in steps of 64: in bf16 on sm_90 gtc's own
      // Hopper GEMM (gemm_wgmma.cuh) runs it in place of cuBLASLt's
      // (test/gpu/run.sh's "gemm" section checks it both ways, the other
      // with GTC_HOPPER_GEMM=0).
      {"HopperGemmGelu", R"(model m {
    input x: f32[B, 64]
    h = gelu(linear(x, 256), approximate: true)
    loss = mean(linear(h, 8) * linear(h, 8, bias: false))
  })", 256, 3, 24},
      // Its gradient through the GELU (dy W, W [64, 256]) in whole tiles:
      // in bf16 on sm_90 gtc's Hopper GEMM also sums its columns, the
      // first linear's bias gradient (rt::dgeluSumsFit); elsewhere
      // cuBLASLt's DGELU and a column-sum kernel do.
      {"HopperGemmGeluGrad", R"(model m {
    input x: f32[B, 64]
    h = linear(gelu(linear(x, 256), approximate: true), 64)
    loss = mean(h * h)
  })", 256, 3, 24},
      // Both at the K of GPT-2 1558M (1600) with B over 12 MiB ([4096,
      // 1600] and [1600, 4096]): gtc's Hopper GEMM takes its tiles by
      // groups of 8 tile rows, here 9 (a group of 8 and one of 1). Too
      // large for central differences in float64; gtc-gpu-check compares
      // it with the CPU.
      {"HopperGemmGeluGrouped", R"(model m {
    input x: f32[B, 1600]
    h = linear(gelu(linear(x, 4096), approximate: true), 1600)
    loss = mean(h * h)
  })", 1152, 3, 24, 0, false},
  };
  return models;
}

/// The model of opModels() named `name`, or null.
inline const OpModel *findOpModel(const std::string &name) {
  for (const OpModel &m : opModels())
    if (m.name == name)
      return &m;
  return nullptr;
}

} // namespace gtc::test

#endif // GTC_TEST_OPMODELS_H
