//===- Messages.cpp - The name that begins the runtime's messages ---------===//

#include "gtc/Runtime/Messages.h"

namespace gtc::rt {

namespace {
std::string &name() {
  static std::string program = "gtc";
  return program;
}
} // namespace

void setProgramName(std::string program) {
  if (!program.empty())
    name() = std::move(program);
}

const std::string &programName() { return name(); }

std::string errorPrefix() { return name() + ": error: "; }

std::string notePrefix() { return name() + ": note: "; }

} // namespace gtc::rt
