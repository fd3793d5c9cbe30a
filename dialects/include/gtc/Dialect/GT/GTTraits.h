//===- GTTraits.h - Facts about gt ops that passes ask ----------*- C++ -*-===//
//
// The traits declared in GTTraits.td: markers without verification, asked
// with `op->hasTrait<OpTrait::gt::Elementwise>()`.
//===----------------------------------------------------------------------===//

#ifndef GTC_DIALECT_GT_GTTRAITS_H
#define GTC_DIALECT_GT_GTTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::OpTrait::gt {

#define GT_MARKER_TRAIT(Name)                                                  \
  template <typename ConcreteType>                                             \
  class Name : public TraitBase<ConcreteType, Name> {};

GT_MARKER_TRAIT(Elementwise)
GT_MARKER_TRAIT(Leaf)
GT_MARKER_TRAIT(Broadcasting)
GT_MARKER_TRAIT(LayoutOnly)
GT_MARKER_TRAIT(Contraction)
GT_MARKER_TRAIT(Reduction)
GT_MARKER_TRAIT(ZeroPreserving)
GT_MARKER_TRAIT(CastEpilogue)
GT_MARKER_TRAIT(AutocastLow)
GT_MARKER_TRAIT(AutocastF32)
GT_MARKER_TRAIT(F32Statistics)

#undef GT_MARKER_TRAIT

} // namespace mlir::OpTrait::gt

#endif // GTC_DIALECT_GT_GTTRAITS_H
