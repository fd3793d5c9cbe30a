//===- Messages.h - The name that begins the runtime's messages -*- C++ -*-===//
//
// The runtime's errors and notes begin with the program's name, as a
// compiler's do: "gtc: error: ..." under gtc, and "NAME: error: ..." in an
// executable that `gtc compile` wrote, whose main sets its own name, so that
// a user of the executable is not told about a program they did not run.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_MESSAGES_H
#define GTC_RUNTIME_MESSAGES_H

#include <string>

namespace gtc::rt {

/// Sets the name the runtime's messages begin with ("gtc" until set).
void setProgramName(std::string name);
const std::string &programName();

/// "NAME: error: ".
std::string errorPrefix();
/// "NAME: note: ".
std::string notePrefix();

} // namespace gtc::rt

#endif // GTC_RUNTIME_MESSAGES_H
