//===- Files.cpp - Writing files safely -----------------------------------===//

#include "gtc/Runtime/Files.h"
#include <sys/stat.h>
#include <unistd.h>

std::string gtc::rt::tempPathBeside(const std::string &path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void gtc::rt::makeDirectories(const std::string &path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/')
      ::mkdir(path.substr(0, i).c_str(), 0755);
}

bool gtc::rt::sameFile(const std::string &a, const std::string &b) {
  struct stat x, y;
  return !a.empty() && !b.empty() && ::stat(a.c_str(), &x) == 0 &&
         ::stat(b.c_str(), &y) == 0 && x.st_dev == y.st_dev &&
         x.st_ino == y.st_ino;
}

std::string gtc::rt::directoryOf(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "."
         : slash == 0               ? "/"
                                    : path.substr(0, slash);
}

bool gtc::rt::sameTarget(const std::string &a, const std::string &b) {
  if (a.empty() || b.empty())
    return false;
  if (a == b || sameFile(a, b))
    return true;
  auto name = [](const std::string &path) {
    return path.substr(path.rfind('/') + 1); // (npos + 1 is 0)
  };
  return !name(a).empty() && name(a) == name(b) &&
         sameFile(directoryOf(a), directoryOf(b));
}

std::string gtc::rt::runningProgram() { return "/proc/self/exe"; }
