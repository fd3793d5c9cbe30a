// RUN: gtc-opt %s --gt-shape-inference=batch=2 --gt-autodiff --gt-checkpoint=every=1 | FileCheck %s --check-prefix=EVERY1
// RUN: gtc-opt %s --gt-shape-inference=batch=2 --gt-autodiff --gt-checkpoint=every=2 | FileCheck %s --check-prefix=EVERY2
// RUN: gtc-opt %s --gt-shape-inference=batch=2 --gt-autodiff --gt-checkpoint | FileCheck %s --check-prefix=NONE
// RUN: gtc-opt %s --gt-shape-inference=batch=2 --gt-autodiff '--gt-checkpoint=every=1 groups=0 cheap-groups=-1' | FileCheck %s --check-prefix=CHEAP
// RUN: gtc-opt %s --gt-shape-inference=batch=2 --gt-autodiff '--gt-checkpoint=every=1 groups=0 cheap-groups=1' | FileCheck %s --check-prefix=CHEAP1
// RUN: gtc-opt %s --gt-shape-inference=batch=2 --gt-autodiff '--gt-checkpoint=every=1 groups=1 cheap-groups=-1' | FileCheck %s --check-prefix=MIXED

// Two iterations of `repeat 2 { h = h + linear(relu(linear(h, 8)), 4) }`
// (gtc names their parameters blocks.0.* and blocks.1.*), then a loss that
// reads no parameter.
module {
  func.func @two() -> tensor<f32> attributes {gt.model} {
    %0 = gt.input "x" : tensor<?x4xf32>
    %1 = gt.param "blocks.0.fc1.weight" = "uniform" [-5.000000e-01, 5.000000e-01] : tensor<8x4xf32>
    %2 = gt.param "blocks.0.fc1.bias" = "uniform" [-5.000000e-01, 5.000000e-01] : tensor<8xf32>
    %3 = gt.linear %0, %1, %2 : tensor<?x4xf32>, tensor<8x4xf32>, tensor<8xf32>
    %4 = gt.relu %3  : tensor<?x8xf32>
    %5 = gt.param "blocks.0.fc2.weight" = "uniform" [-0.35355339059327373, 0.35355339059327373] : tensor<4x8xf32>
    %6 = gt.param "blocks.0.fc2.bias" = "uniform" [-0.35355339059327373, 0.35355339059327373] : tensor<4xf32>
    %7 = gt.linear %4, %5, %6 : tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>
    %8 = gt.add %0, %7 : tensor<?x4xf32>, tensor<?x4xf32>
    %9 = gt.param "blocks.1.fc1.weight" = "uniform" [-5.000000e-01, 5.000000e-01] : tensor<8x4xf32>
    %10 = gt.param "blocks.1.fc1.bias" = "uniform" [-5.000000e-01, 5.000000e-01] : tensor<8xf32>
    %11 = gt.linear %8, %9, %10 : tensor<?x4xf32>, tensor<8x4xf32>, tensor<8xf32>
    %12 = gt.relu %11  : tensor<?x8xf32>
    %13 = gt.param "blocks.1.fc2.weight" = "uniform" [-0.35355339059327373, 0.35355339059327373] : tensor<4x8xf32>
    %14 = gt.param "blocks.1.fc2.bias" = "uniform" [-0.35355339059327373, 0.35355339059327373] : tensor<4xf32>
    %15 = gt.linear %12, %13, %14 : tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>
    %16 = gt.add %8, %15 : tensor<?x4xf32>, tensor<?x4xf32>
    %17 = gt.mul %16, %16 : tensor<?x4xf32>, tensor<?x4xf32>
    %18 = gt.mean %17  : tensor<?x4xf32>
    return %18 : tensor<f32>
  }
}

// every(1): each block keeps only its input (x, then the first block's
// output h1); the backward recomputes a block's linear and relu from there
// just before it needs them, last block first, and reads only the clones.
// The residual adds that end a block and the loss are not recomputed.
// EVERY1-LABEL: func.func @two_step
// EVERY1:      %[[X:.*]] = gt.input "x"
// EVERY1:      %[[W1:.*]] = gt.param "blocks.0.fc1.weight"
// EVERY1:      %[[B1:.*]] = gt.param "blocks.0.fc1.bias"
// EVERY1:      %[[H1:.*]] = gt.add %[[X]], %{{.*}}
// EVERY1:      %[[W3:.*]] = gt.param "blocks.1.fc1.weight"
// EVERY1:      %[[B3:.*]] = gt.param "blocks.1.fc1.bias"
// EVERY1:      %[[H2:.*]] = gt.add %[[H1]], %{{.*}}
// EVERY1:      gt.constant {{.*}} {gt.loss_grad}
// EVERY1-NOT:  gt.mean
// EVERY1:      %[[Z3:.*]] = gt.linear %[[H1]], %[[W3]], %[[B3]]
// EVERY1-NEXT: %[[R3:.*]] = gt.relu %[[Z3]]
// EVERY1-NEXT: gt.matmul %{{.*}}, %[[R3]] <{transpose_a = true}>
// EVERY1:      gt.activation_grad %{{.*}}, %[[Z3]] <{kind = "relu"}>
// EVERY1:      %[[Z1:.*]] = gt.linear %[[X]], %[[W1]], %[[B1]]
// EVERY1-NEXT: %[[R1:.*]] = gt.relu %[[Z1]]
// EVERY1-NEXT: gt.matmul %{{.*}}, %[[R1]] <{transpose_a = true}>
// EVERY1:      gt.activation_grad %{{.*}}, %[[Z1]] <{kind = "relu"}>
// EVERY1:      gt.gradient "blocks.0.fc1.weight"

// every(2): both blocks are one group, so h1 is recomputed too, from x.
// EVERY2-LABEL: func.func @two_step
// EVERY2:      %[[X:.*]] = gt.input "x"
// EVERY2:      gt.constant {{.*}} {gt.loss_grad}
// EVERY2:      %[[Z1:.*]] = gt.linear %[[X]]
// EVERY2-NEXT: %[[R1:.*]] = gt.relu %[[Z1]]
// EVERY2-NEXT: %[[Y1:.*]] = gt.linear %[[R1]]
// EVERY2-NEXT: %[[H1:.*]] = gt.add %[[X]], %[[Y1]]
// EVERY2-NEXT: %[[Z3:.*]] = gt.linear %[[H1]]
// EVERY2-NEXT: %[[R3:.*]] = gt.relu %[[Z3]]
// EVERY2:      gt.matmul %{{.*}}, %[[H1]] <{transpose_a = true}>

// Cheap values only (selective checkpointing): a block's relu output, which
// its fc2 weight gradient reads, is recomputed from the fc1 output that the
// relu's gradient keeps anyway; no GEMM is recomputed, and the block input
// h1 stays (the second fc1's weight gradient reads it).
// CHEAP-LABEL: func.func @two_step
// CHEAP:      %[[X:.*]] = gt.input "x"
// CHEAP:      %[[Z1:.*]] = gt.linear %[[X]]
// CHEAP:      %[[H1:.*]] = gt.add %[[X]], %{{.*}}
// CHEAP:      %[[Z3:.*]] = gt.linear %[[H1]]
// CHEAP:      gt.constant {{.*}} {gt.loss_grad}
// CHEAP-NOT:  gt.linear
// CHEAP:      %[[R3:.*]] = gt.relu %[[Z3]]
// CHEAP-NEXT: gt.matmul %{{.*}}, %[[R3]] <{transpose_a = true}>
// CHEAP:      gt.activation_grad %{{.*}}, %[[Z3]] <{kind = "relu"}>
// CHEAP:      gt.matmul %{{.*}}, %[[H1]] <{transpose_a = true}>
// CHEAP:      %[[R1:.*]] = gt.relu %[[Z1]]
// CHEAP-NEXT: gt.matmul %{{.*}}, %[[R1]] <{transpose_a = true}>
// CHEAP-NOT:  gt.linear
// CHEAP:      return

// cheap-groups=1: only the first block's relu is recomputed; the second
// block's backward reads the forward one.
// CHEAP1-LABEL: func.func @two_step
// CHEAP1:      %[[X:.*]] = gt.input "x"
// CHEAP1:      %[[H1:.*]] = gt.add %[[X]], %{{.*}}
// CHEAP1:      %[[Z3:.*]] = gt.linear %[[H1]]
// CHEAP1-NEXT: %[[R3:.*]] = gt.relu %[[Z3]]
// CHEAP1:      gt.constant {{.*}} {gt.loss_grad}
// CHEAP1:      gt.matmul %{{.*}}, %[[R3]] <{transpose_a = true}>
// CHEAP1:      gt.activation_grad %{{.*}}, %[[Z3]] <{kind = "relu"}>
// CHEAP1:      %[[R1:.*]] = gt.relu
// CHEAP1-NEXT: gt.matmul %{{.*}}, %[[R1]] <{transpose_a = true}>

// groups=1 with the others cheap: the first block is recomputed whole
// (its linear too), the second only its relu.
// MIXED-LABEL: func.func @two_step
// MIXED:      %[[X:.*]] = gt.input "x"
// MIXED:      %[[H1:.*]] = gt.add %[[X]], %{{.*}}
// MIXED:      %[[Z3:.*]] = gt.linear %[[H1]]
// MIXED:      gt.constant {{.*}} {gt.loss_grad}
// MIXED:      %[[R3:.*]] = gt.relu %[[Z3]]
// MIXED-NEXT: gt.matmul %{{.*}}, %[[R3]] <{transpose_a = true}>
// MIXED:      %[[Z1:.*]] = gt.linear %[[X]]
// MIXED-NEXT: %[[R1:.*]] = gt.relu %[[Z1]]
// MIXED-NEXT: gt.matmul %{{.*}}, %[[R1]] <{transpose_a = true}>
// MIXED:      gt.activation_grad %{{.*}}, %[[Z1]] <{kind = "relu"}>

// Without the option and without a train block: nothing is recomputed.
// NONE-LABEL: func.func @two_step
// NONE:       gt.constant {{.*}} {gt.loss_grad}
// NONE-NOT:   gt.linear
// NONE-NOT:   gt.relu
// NONE:       return
