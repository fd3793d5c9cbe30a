//===- SafetensorsFuzzer.cpp - Fuzzes the checkpoint reader ---------------===//
//
// Input: a whole .safetensors file. readSafetensors must accept it or say
// what is wrong; never crash, never read outside the file.
//===----------------------------------------------------------------------===//

#include "FuzzHelpers.h"
#include "gtc/Runtime/Checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path =
      gtc::fuzz::writeScratch("input.safetensors", data, size);
  std::vector<gtc::rt::StoredTensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string error;
  if (!gtc::rt::readSafetensors(path, tensors, metadata, error) &&
      error.empty())
    __builtin_trap(); // a failure must say why
  return 0;
}
