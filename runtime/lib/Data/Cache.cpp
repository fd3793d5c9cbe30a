//===- Cache.cpp - gtc's cache: kernels, GPU memory measured --------------===//
//
// The memory records are lines of one text file in the cache directory:
// "GPU<TAB>processes<TAB>context bytes<TAB>rest bytes", written through a
// temporary file and a rename so that a reader never sees half of one.
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Cache.h"
#include "gtc/Runtime/Files.h"
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

std::string recordsPath() {
  return gtc::rt::cacheDirectory() + "/gpu-memory.tsv";
}

/// One line's fields; false for a line that is not a record.
bool parseRecord(const std::string &line, std::string &gpu, int &processes,
                 gtc::rt::OutsideMemory &m) {
  std::istringstream in(line);
  std::string p, c, r;
  if (!std::getline(in, gpu, '\t') || !std::getline(in, p, '\t') ||
      !std::getline(in, c, '\t') || !std::getline(in, r) || p.empty() ||
      c.empty() || r.empty())
    return false;
  char *end = nullptr;
  processes = static_cast<int>(std::strtol(p.c_str(), &end, 10));
  if (*end || processes < 1)
    return false;
  m.context = std::strtoll(c.c_str(), &end, 10);
  if (*end || m.context < 0)
    return false;
  m.rest = std::strtoll(r.c_str(), &end, 10);
  return !*end && m.rest >= 0;
}

} // namespace

std::string gtc::rt::cacheDirectory() {
  if (const char *d = std::getenv("GTC_CACHE_DIR"))
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"))
    return std::string(x) + "/gtc";
  if (const char *home = std::getenv("HOME"))
    return std::string(home) + "/.cache/gtc";
  return "/tmp/gtc-cache";
}

void gtc::rt::recordOutsideMemory(const std::string &gpu, int processes,
                                  const OutsideMemory &m) {
  if (gpu.empty() || gpu.find_first_of("\t\n") != std::string::npos)
    return;
  std::vector<std::string> keep;
  if (std::ifstream in{recordsPath()}) {
    std::string line, g;
    int p = 0;
    OutsideMemory old;
    while (std::getline(in, line))
      if (parseRecord(line, g, p, old) && !(g == gpu && p == processes))
        keep.push_back(line);
  }
  std::ostringstream line;
  line << gpu << '\t' << processes << '\t' << m.context << '\t' << m.rest;
  keep.push_back(line.str());
  makeDirectories(cacheDirectory());
  const std::string tmp = tempPathBeside(recordsPath());
  {
    std::ofstream out(tmp);
    for (const std::string &l : keep)
      out << l << '\n';
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), recordsPath().c_str()) != 0)
    std::remove(tmp.c_str());
}

std::optional<gtc::rt::OutsideMemory>
gtc::rt::recordedOutsideMemory(const std::string &gpu, int processes) {
  std::ifstream in{recordsPath()};
  std::string line, g;
  int p = 0;
  OutsideMemory m;
  std::optional<OutsideMemory> found;
  while (std::getline(in, line))
    if (parseRecord(line, g, p, m) && g == gpu && p == processes)
      found = m;
  return found;
}
