// RUN: gtc-opt %s --gt-autocast=precision=bf16 --split-input-file | FileCheck %s
// RUN: gtc-opt %s --gt-autocast=precision=fp16 --split-input-file | FileCheck %s --check-prefix=F16
// RUN: gtc-opt %s --gt-autocast=precision=tf32 --split-input-file | FileCheck %s --check-prefix=KEEP
// RUN: gtc-opt %s --gt-autocast=print-policy=1 --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=POLICY

// linear runs in the low type; its f32 input and parameters are cast once;
// relu follows its (now bf16) operand; cross_entropy runs in f32.
// CHECK-LABEL: func.func @mlp
// CHECK:      %[[X:.*]] = gt.input "x" : tensor<4x8xf32>
// CHECK-NEXT: %[[XL:.*]] = gt.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:      %[[W:.*]] = gt.param "w"
// CHECK-NEXT: %[[WL:.*]] = gt.cast %[[W]] : tensor<3x8xf32> -> tensor<3x8xbf16>
// CHECK:      %[[H:.*]] = gt.linear %[[XL]], %[[WL]] : tensor<4x8xbf16>, tensor<3x8xbf16>
// CHECK-NEXT: %[[R:.*]] = gt.relu %[[H]] : tensor<4x3xbf16>
// CHECK-NEXT: %[[RF:.*]] = gt.cast %[[R]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK-NEXT: %[[L:.*]] = gt.cross_entropy %[[RF]], %{{.*}} : tensor<4x3xf32>, tensor<4xi32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
// F16: gt.linear {{.*}} : tensor<4x8xf16>, tensor<3x8xf16>
// KEEP-LABEL: func.func @mlp
// KEEP-NOT: gt.cast
// POLICY: gt-autocast policy
// POLICY-NEXT: low (bf16/fp16, f32 accumulation): gt.attention gt.linear gt.matmul
// POLICY-NEXT: fp32: {{ *}}gt.cross_entropy gt.exp gt.layernorm gt.log gt.mean gt.rmsnorm gt.softmax gt.sqrt gt.sum
func.func @mlp() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<4x8xf32>
  %y = gt.label "y" : tensor<4xi32>
  %w = gt.param "w" = "zeros" [] : tensor<3x8xf32>
  %h = gt.linear %x, %w : tensor<4x8xf32>, tensor<3x8xf32>
  %r = gt.relu %h : tensor<4x3xf32>
  %l = gt.cross_entropy %r, %y : tensor<4x3xf32>, tensor<4xi32>
  return %l : tensor<f32>
}

// -----

// A parameter used by two low-precision ops gets one cast; its f32 use
// (the embedding) keeps the master weight. layernorm stays f32; an add of
// two bf16 values stays bf16 (it follows its operands), and an existing
// cast now converts from bf16.
// KEEP-LABEL: func.func @tied
// CHECK-LABEL: func.func @tied
// CHECK:      %[[WTE:.*]] = gt.param "wte"
// CHECK-NEXT: %[[WL:.*]] = gt.cast %[[WTE]] : tensor<6x4xf32> -> tensor<6x4xbf16>
// CHECK-NOT:  gt.cast %[[WTE]]
// CHECK:      %[[E:.*]] = gt.embedding %{{.*}}, %[[WTE]] : tensor<2x3xi32>, tensor<6x4xf32>
// CHECK:      gt.matmul %{{.*}}, %[[WL]] <{transpose_b = true}> : tensor<2x3x4xbf16>, tensor<6x4xbf16>
// CHECK:      gt.linear %{{.*}}, %[[WL]] : tensor<2x3x4xbf16>, tensor<6x4xbf16>
// CHECK:      %[[S:.*]] = gt.add %{{.*}}, %{{.*}} : tensor<2x3x6xbf16>, tensor<2x3x6xbf16>
// CHECK-NEXT: gt.cast %[[S]] : tensor<2x3x6xbf16> -> tensor<2x3x6xf32>
func.func @tied() -> tensor<f32> attributes {gt.model} {
  %t = gt.input "t" : tensor<2x3xi32>
  %wte = gt.param "wte" = "normal" [0.0, 0.02] : tensor<6x4xf32>
  %e = gt.embedding %t, %wte : tensor<2x3xi32>, tensor<6x4xf32>
  %g = gt.param "g" = "ones" [] : tensor<4xf32>
  %b = gt.param "b" = "zeros" [] : tensor<4xf32>
  %n = gt.layernorm %e, %g, %b : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>
  %m = gt.matmul %n, %wte <{transpose_b = true}> : tensor<2x3x4xf32>, tensor<6x4xf32>
  %lin = gt.linear %n, %wte : tensor<2x3x4xf32>, tensor<6x4xf32>
  %s = gt.add %m, %lin : tensor<2x3x6xf32>, tensor<2x3x6xf32>
  %f = gt.cast %s : tensor<2x3x6xf32> -> tensor<2x3x6xf32>
  %loss = gt.mean %f : tensor<2x3x6xf32>
  return %loss : tensor<f32>
}

// -----

// A residual add of a bf16 and an f32 value runs in f32 (the widest operand).
// CHECK-LABEL: func.func @residual
// CHECK:      %[[H:.*]] = gt.linear {{.*}} : tensor<2x4xbf16>, tensor<4x4xbf16>
// CHECK-NEXT: %[[HF:.*]] = gt.cast %[[H]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: gt.add %[[X:.*]], %[[HF]] : tensor<2x4xf32>, tensor<2x4xf32>
func.func @residual() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x4xf32>
  %w = gt.param "w" = "zeros" [] : tensor<4x4xf32>
  %h = gt.linear %x, %w : tensor<2x4xf32>, tensor<4x4xf32>
  %s = gt.add %x, %h : tensor<2x4xf32>, tensor<2x4xf32>
  %m = gt.mean %s : tensor<2x4xf32>
  return %m : tensor<f32>
}

// -----

// attention's log-sum-exp stays f32 (F32Statistics): it neither makes the
// gradient f32 (the widest of its other operands, bf16) nor is cast.
// CHECK-LABEL: func.func @attention_statistics
// CHECK:      %[[QKV:.*]] = gt.input "qkv" : tensor<2x4x24xbf16>
// CHECK-NEXT: %[[Y:[^ ,]*]], %[[LSE:.*]] = gt.attention %[[QKV]] <{heads = 2 : i64}> : tensor<2x4x24xbf16>
// CHECK-NEXT: gt.attention_grad %[[Y]], %[[Y]], %[[LSE]], %[[QKV]] <{heads = 2 : i64}> : tensor<2x4x8xbf16>, tensor<2x2x4xf32>, tensor<2x4x24xbf16>
func.func @attention_statistics() -> tensor<f32> attributes {gt.model} {
  %qkv = gt.input "qkv" : tensor<2x4x24xbf16>
  %y, %lse = gt.attention %qkv <{heads = 2 : i64}> : tensor<2x4x24xbf16>
  %d = gt.attention_grad %y, %y, %lse, %qkv <{heads = 2 : i64}> : tensor<2x4x8xbf16>, tensor<2x2x4xf32>, tensor<2x4x24xbf16>
  %m = gt.mean %d : tensor<2x4x24xbf16>
  %l = gt.cast %m : tensor<bf16> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A parameter declared bf16 is trained as an f32 master weight used through
// one cast to bf16, at every precision (here tf32, which changes nothing
// else): the optimizer updates f32.
// KEEP-LABEL: func.func @bf16_param
// KEEP:      %[[P:.*]] = gt.param "w" = "zeros" [] : tensor<4x3xf32>
// KEEP-NEXT: %[[C:.*]] = gt.cast %[[P]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// KEEP-NEXT: %[[Y:.*]] = gt.matmul %{{.*}}, %[[C]]
// CHECK-LABEL: func.func @bf16_param
// CHECK:      gt.param "w" = "zeros" [] : tensor<4x3xf32>
// CHECK-NEXT: gt.cast {{.*}} : tensor<4x3xf32> -> tensor<4x3xbf16>
// F16-LABEL: func.func @bf16_param
// F16:      gt.param "w" = "zeros" [] : tensor<4x3xf32>
func.func @bf16_param() -> tensor<f32> attributes {gt.model} {
  %x = gt.input "x" : tensor<2x4xbf16>
  %w = gt.param "w" = "zeros" [] : tensor<4x3xbf16>
  %y = gt.matmul %x, %w : tensor<2x4xbf16>, tensor<4x3xbf16>
  %m = gt.mean %y : tensor<2x3xbf16>
  %l = gt.cast %m : tensor<bf16> -> tensor<f32>
  return %l : tensor<f32>
}
