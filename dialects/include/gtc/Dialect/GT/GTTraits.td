//===- GTTraits.td - Facts about gt ops that passes ask -----*- tablegen -*-===//
//
// What a pass needs to know about an op is declared on the op, once, as a
// trait: gt-fuse asks whether it is elementwise or a contraction, gt-autocast
// its precision class, gt-pad-dims whether zero padding commutes with it.
// No pass keeps a list of op names. The C++ classes are in GTTraits.h.
//===----------------------------------------------------------------------===//

#ifndef GT_TRAITS
#define GT_TRAITS

include "mlir/IR/OpBase.td"

class GT_Trait<string name> : NativeOpTrait<name> {
  let cppNamespace = "::mlir::OpTrait::gt";
}

/// Each result element is a function of the operand elements at the same
/// index (after NumPy broadcasting of the operands to the result): fusable
/// into one elementwise loop with its producers and consumers.
def GT_Elementwise : GT_Trait<"Elementwise">;

/// Reads no tensor (the step's inputs, labels, parameters, constants,
/// positions): its value exists everywhere in the step, so gt-checkpoint
/// never recomputes it and gt-fuse does not group ops for sharing it.
def GT_Leaf : GT_Trait<"Leaf">;

/// Operands broadcast to the result's shape with NumPy rules.
def GT_Broadcasting : GT_Trait<"Broadcasting">;

/// Moves or repeats elements without arithmetic (reshape, transpose,
/// broadcast, pad, slice).
def GT_LayoutOnly : GT_Trait<"LayoutOnly">;

/// A matrix product (GEMMs, attention): never recomputed or duplicated by a
/// fusion; epilogues fold into it.
def GT_Contraction : GT_Trait<"Contraction">;

/// Combines many input elements into each output element (sums, norms,
/// softmax, losses): prologues and epilogues fuse into it, it is never
/// recomputed.
def GT_Reduction : GT_Trait<"Reduction">;

/// Its kernel can store the result in another float type, so a gt.cast of
/// the result folds into it (gt-fuse's "epilogue" regions).
def GT_CastEpilogue : GT_Trait<"CastEpilogue">;

/// f(0) = 0 elementwise: zero padding commutes with the op, so a padded
/// tensor may flow through it unsliced (gt-pad-dims).
def GT_ZeroPreserving : GT_Trait<"ZeroPreserving">;

/// gt-autocast: computes in the low precision (bf16/fp16, f32 accumulation).
def GT_AutocastLow : GT_Trait<"AutocastLow">;

/// gt-autocast: computes in f32 whatever its operands (softmax, norms,
/// reductions, exp/log, losses).
def GT_AutocastF32 : GT_Trait<"AutocastF32">;
/// gt-autocast: the last operand holds f32 row statistics of the forward op
/// (attention's log-sum-exp); it stays f32 and does not choose the op's
/// precision.
def GT_F32Statistics : GT_Trait<"F32Statistics">;

#endif // GT_TRAITS
