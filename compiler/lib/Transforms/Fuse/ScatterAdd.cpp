//===- ScatterAdd.cpp - Scatter-add regions -------------------------------===//
//
// "scatter_add" regions: an embedding gradient added to another
// gradient of its table (a tied embedding), as a scatter onto it.
//===----------------------------------------------------------------------===//

#include "Fuser.h"

namespace mlir::gt::fuse {

void Fuser::foldScatterAdds() {
  SmallVector<Group> folds;
  for (auto scatter : block.getOps<EmbeddingGradOp>()) {
    auto add = dyn_cast_or_null<AddOp>(soleUser(scatter.getResult()));
    if (!add || add.getLhs().getType() != add.getRhs().getType() ||
        add.getType() != scatter.getType())
      continue;
    Group g{scatter, {scatter, add}};
    if (readsOnlyAvailable(g))
      folds.push_back(g);
  }
  for (Group &g : folds)
    outline(g, "scatter_add");
}

} // namespace mlir::gt::fuse
