// RUN: gtc-opt %s | FileCheck %s
// RUN: gtc-opt %s | gtc-opt | FileCheck %s
// RUN: gtc-opt %s --mlir-print-op-generic | gtc-opt | FileCheck %s

// Every gt op parses, verifies and prints back (round trip), also through
// the generic form.

// CHECK-LABEL: func.func @all_ops
func.func @all_ops() -> tensor<f32> attributes {gt.model} {
  // CHECK: %[[X:.*]] = gt.input "x" : tensor<?x4x8xf32>
  %x = gt.input "x" : tensor<?x4x8xf32>
  // CHECK: %[[T:.*]] = gt.input "t" : tensor<?x4xi32>
  %t = gt.input "t" : tensor<?x4xi32>
  // CHECK: %[[Y:.*]] = gt.label "y" : tensor<?x4xi32>
  %y = gt.label "y" : tensor<?x4xi32>
  // CHECK: %[[W:.*]] = gt.param "w" = "uniform" [-1.000000e-01, 1.000000e-01] : tensor<24x8xf32>
  %w = gt.param "w" = "uniform" [-0.1, 0.1] : tensor<24x8xf32>
  // CHECK: %[[G:.*]] = gt.param "g" = "ones" [] : tensor<8xf32>
  %g = gt.param "g" = "ones" [] : tensor<8xf32>
  // CHECK: %[[B:.*]] = gt.param "b" = "zeros" [] : tensor<8xf32>
  %b = gt.param "b" = "zeros" [] : tensor<8xf32>
  // CHECK: %[[E:.*]] = gt.param "e" = "normal" [0.000000e+00, 2.000000e-02] : tensor<16x8xf32>
  %e = gt.param "e" = "normal" [0.0, 0.02] : tensor<16x8xf32>
  // CHECK: %[[C:.*]] = gt.constant dense<5.000000e-01> : tensor<f32>
  %c = gt.constant dense<0.5> : tensor<f32>
  // CHECK: %[[P:.*]] = gt.positions 4 : tensor<4xi32>
  %p = gt.positions 4 : tensor<4xi32>

  // CHECK: gt.add %[[X]], %[[C]] : tensor<?x4x8xf32>, tensor<f32>
  %0 = gt.add %x, %c : tensor<?x4x8xf32>, tensor<f32>
  // CHECK: gt.sub %{{.*}}, %[[G]] : tensor<?x4x8xf32>, tensor<8xf32>
  %1 = gt.sub %0, %g : tensor<?x4x8xf32>, tensor<8xf32>
  // CHECK: gt.mul
  %2 = gt.mul %1, %1 : tensor<?x4x8xf32>, tensor<?x4x8xf32>
  // CHECK: gt.div
  %3 = gt.div %2, %c : tensor<?x4x8xf32>, tensor<f32>
  // CHECK: gt.relu %{{.*}} : tensor<?x4x8xf32>
  %4 = gt.relu %3 : tensor<?x4x8xf32>
  // CHECK: gt.gelu %{{.*}} <{approximate = true}> : tensor<?x4x8xf32>
  %5 = gt.gelu %4 <{approximate = true}> : tensor<?x4x8xf32>
  %6 = gt.tanh %5 : tensor<?x4x8xf32>
  %7 = gt.exp %6 : tensor<?x4x8xf32>
  %8 = gt.log %7 : tensor<?x4x8xf32>
  %9 = gt.neg %8 : tensor<?x4x8xf32>
  %10 = gt.sqrt %9 : tensor<?x4x8xf32>
  %11 = gt.sigmoid %10 : tensor<?x4x8xf32>
  // CHECK: gt.layernorm %{{.*}}, %[[G]], %[[B]] : tensor<?x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %12 = gt.layernorm %11, %g, %b : tensor<?x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: %[[RN:.*]] = gt.rmsnorm %{{.*}}, %[[G]] <{epsilon = 1.000000e-05 : f64}> : tensor<?x4x8xf32>, tensor<8xf32>
  %rn = gt.rmsnorm %12, %g <{epsilon = 1.0e-5 : f64}> : tensor<?x4x8xf32>, tensor<8xf32>
  // CHECK: gt.rmsnorm_grad %[[RN]], %{{.*}}, %[[G]] : tensor<?x4x8xf32>, tensor<8xf32>
  %rdx, %rdw = gt.rmsnorm_grad %rn, %12, %g : tensor<?x4x8xf32>, tensor<8xf32>
  // CHECK: gt.dropout %[[RN]] <{p = 2.500000e-01 : f64, salt = 3 : i64}> : tensor<?x4x8xf32>
  %dr = gt.dropout %rn <{p = 0.25 : f64, salt = 3 : i64}> : tensor<?x4x8xf32>
  // CHECK: gt.rope %{{.*}} <{inverse = true, theta = 5.000000e+05 : f64}> : tensor<?x4x2x4xf32>
  %rh = gt.reshape %rn : tensor<?x4x8xf32> -> tensor<?x4x2x4xf32>
  %ro = gt.rope %rh <{theta = 5.0e5 : f64, inverse = true}> : tensor<?x4x2x4xf32>
  // CHECK: %[[QKV:.*]] = gt.linear %{{.*}}, %[[W]] : tensor<?x4x8xf32>, tensor<24x8xf32>
  %qkv = gt.linear %12, %w : tensor<?x4x8xf32>, tensor<24x8xf32>
  // CHECK: %[[ATT:[^ ,]*]], %[[LSE:.*]] = gt.attention %[[QKV]] <{heads = 2 : i64}> : tensor<?x4x24xf32>
  %13, %lse = gt.attention %qkv <{heads = 2 : i64}> : tensor<?x4x24xf32>
  // CHECK: gt.attention_grad %[[ATT]], %[[ATT]], %[[LSE]], %[[QKV]] <{heads = 2 : i64}> : tensor<?x4x8xf32>, tensor<?x2x4xf32>, tensor<?x4x24xf32>
  %dqkv = gt.attention_grad %13, %13, %lse, %qkv <{heads = 2 : i64}> : tensor<?x4x8xf32>, tensor<?x2x4xf32>, tensor<?x4x24xf32>
  // CHECK: gt.linear %{{.*}}, %[[W]], %{{.*}} : tensor<?x4x8xf32>, tensor<24x8xf32>, tensor<24xf32>
  %bias = gt.param "bias" = "zeros" [] : tensor<24xf32>
  %14 = gt.linear %13, %w, %bias : tensor<?x4x8xf32>, tensor<24x8xf32>, tensor<24xf32>
  // CHECK: gt.softmax %{{.*}} <{axis = 1 : i64}> : tensor<?x4x24xf32>
  %15 = gt.softmax %14 <{axis = 1 : i64}> : tensor<?x4x24xf32>
  // CHECK: gt.matmul %{{.*}}, %[[W]] <{transpose_b = true}> : tensor<?x4x8xf32>, tensor<24x8xf32>
  %16 = gt.matmul %13, %w <{transpose_b = true}> : tensor<?x4x8xf32>, tensor<24x8xf32>
  // CHECK: gt.embedding %[[T]], %[[E]] : tensor<?x4xi32>, tensor<16x8xf32>
  %17 = gt.embedding %t, %e : tensor<?x4xi32>, tensor<16x8xf32>
  // CHECK: gt.embedding %[[P]], %[[E]] : tensor<4xi32>, tensor<16x8xf32>
  %18 = gt.embedding %p, %e : tensor<4xi32>, tensor<16x8xf32>
  // CHECK: gt.transpose %{{.*}} <{permutation = [0, 2, 1]}> : tensor<?x4x8xf32>
  %19 = gt.transpose %17 <{permutation = [0, 2, 1]}> : tensor<?x4x8xf32>
  // CHECK: gt.reshape %{{.*}} : tensor<?x8x4xf32> -> tensor<?x4xf32>
  %20 = gt.reshape %19 : tensor<?x8x4xf32> -> tensor<?x4xf32>
  // CHECK: gt.broadcast %{{.*}} : tensor<4x8xf32> -> tensor<2x4x8xf32>
  %21 = gt.broadcast %18 : tensor<4x8xf32> -> tensor<2x4x8xf32>
  // CHECK: gt.cast %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %22 = gt.cast %21 : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  // CHECK: gt.sum %{{.*}} <{axes = [0], keepdim = true}> : tensor<2x4x8xbf16>
  %23 = gt.sum %22 <{axes = [0], keepdim = true}> : tensor<2x4x8xbf16>
  // CHECK: gt.mean %{{.*}} : tensor<?x4xf32>
  %24 = gt.mean %20 : tensor<?x4xf32>
  // CHECK: %[[L:.*]] = gt.cross_entropy %{{.*}}, %[[Y]] : tensor<?x4x24xf32>, tensor<?x4xi32>
  %loss = gt.cross_entropy %15, %y : tensor<?x4x24xf32>, tensor<?x4xi32>
  // CHECK: return %[[L]] : tensor<f32>
  return %loss : tensor<f32>
}

// CHECK: gt.train @all_ops {batch = 8 : i64, optimizer = {lr = 1.000000e-01 : f64, name = "sgd"}, precision = "bf16"}
gt.train @all_ops {batch = 8 : i64, optimizer = {name = "sgd", lr = 0.1 : f64}, precision = "bf16"}

// gt.pad and gt.slice (inserted by gt-pad-dims).
// CHECK-LABEL: func.func @pad_slice
// CHECK: %[[P:.*]] = gt.pad %{{.*}} : tensor<4x1001xbf16> -> tensor<8x1008xbf16>
// CHECK: gt.slice %[[P]] : tensor<8x1008xbf16> -> tensor<4x1001xbf16>
func.func @pad_slice(%x: tensor<4x1001xbf16>) -> tensor<4x1001xbf16> {
  %p = gt.pad %x : tensor<4x1001xbf16> -> tensor<8x1008xbf16>
  %s = gt.slice %p : tensor<8x1008xbf16> -> tensor<4x1001xbf16>
  return %s : tensor<4x1001xbf16>
}

// Grouped-query attention on separate q, k, v (6 query heads read 2 key
// heads) and its gradient.
// CHECK-LABEL: func.func @grouped_query_attention
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<?x4x6x8xbf16>, %[[K:[^:]*]]: tensor<?x4x2x8xbf16>, %[[V:[^:]*]]: tensor<?x4x2x8xbf16>)
func.func @grouped_query_attention(%q: tensor<?x4x6x8xbf16>, %k: tensor<?x4x2x8xbf16>, %v: tensor<?x4x2x8xbf16>) -> (tensor<?x4x6x8xbf16>, tensor<?x4x2x8xbf16>, tensor<?x4x2x8xbf16>) {
  // CHECK: %[[Y:[^ ,]*]], %[[LSE:.*]] = gt.attention %[[Q]], %[[K]], %[[V]] <{causal = false, heads = 6 : i64}> : tensor<?x4x6x8xbf16>, tensor<?x4x2x8xbf16>, tensor<?x4x2x8xbf16>
  %y, %lse = gt.attention %q, %k, %v <{heads = 6 : i64, causal = false}> : tensor<?x4x6x8xbf16>, tensor<?x4x2x8xbf16>, tensor<?x4x2x8xbf16>
  // CHECK: %[[D:[^ ,:]*]]:3 = gt.attention_grad %[[Y]], %[[Y]], %[[LSE]], %[[Q]], %[[K]], %[[V]] <{causal = false, heads = 6 : i64}> : tensor<?x4x6x8xbf16>, tensor<?x6x4xf32>, tensor<?x4x6x8xbf16>, tensor<?x4x2x8xbf16>, tensor<?x4x2x8xbf16>
  %d:3 = gt.attention_grad %y, %y, %lse, %q, %k, %v <{heads = 6 : i64, causal = false}> : tensor<?x4x6x8xbf16>, tensor<?x6x4xf32>, tensor<?x4x6x8xbf16>, tensor<?x4x2x8xbf16>, tensor<?x4x2x8xbf16>
  // CHECK: return %[[D]]#0, %[[D]]#1, %[[D]]#2
  return %d#0, %d#1, %d#2 : tensor<?x4x6x8xbf16>, tensor<?x4x2x8xbf16>, tensor<?x4x2x8xbf16>
}

// Generation (gt-decode): a KV cache, its update, attention over it, and
// rope at given positions.
// CHECK-LABEL: func.func @decode
func.func @decode(%q: tensor<2x1x4x8xbf16>, %k: tensor<2x1x2x8xbf16>, %p: tensor<2x1xi32>) -> tensor<2x1x4x8xbf16> {
  // CHECK: %[[C:[^ ,:]*]] = gt.state "kv.0.k" : tensor<2x16x2x8xbf16>
  %c = gt.state "kv.0.k" : tensor<2x16x2x8xbf16>
  // CHECK: %[[R:[^ ,:]*]] = gt.rope %{{.*}} at %{{.*}} : tensor<2x1xi32> <{interleaved = true}> : tensor<2x1x2x8xbf16>
  %r = gt.rope %k at %p : tensor<2x1xi32> <{interleaved = true}> : tensor<2x1x2x8xbf16>
  // CHECK: %[[U:[^ ,:]*]] = gt.cache_update %[[C]], %[[R]], %{{.*}} : tensor<2x16x2x8xbf16>, tensor<2x1x2x8xbf16>, tensor<2x1xi32>
  %u = gt.cache_update %c, %r, %p : tensor<2x16x2x8xbf16>, tensor<2x1x2x8xbf16>, tensor<2x1xi32>
  // CHECK: %[[Y:[^ ,:]*]] = gt.cached_attention %{{.*}}, %[[U]], %[[U]], %{{.*}} : tensor<2x1x4x8xbf16>, tensor<2x16x2x8xbf16>, tensor<2x16x2x8xbf16>, tensor<2x1xi32>
  %y = gt.cached_attention %q, %u, %u, %p : tensor<2x1x4x8xbf16>, tensor<2x16x2x8xbf16>, tensor<2x16x2x8xbf16>, tensor<2x1xi32>
  return %y : tensor<2x1x4x8xbf16>
}
