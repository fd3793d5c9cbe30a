//===- Bundle.cpp - The payload of a compiled training executable ---------===//
//
// Layout (little-endian), appended to the runner executable:
//
//   record*    u32 tag length, tag, u64 data length, data
//   trailer    u64 payload length (the records), u64 FNV-1a of the records,
//              the 8 bytes "GTCBNDL1"
//
// Tags: "step", "eval <batch>", "arch <name>", "kernel <key>".
//===----------------------------------------------------------------------===//

#include "gtc/Runtime/Bundle.h"
#include <algorithm>
#include "gtc/Runtime/Rng.h"
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace gtc::rt;

namespace {

constexpr char kMagic[9] = "GTCBNDL1";
constexpr size_t kTrailer = 8 + 8 + 8;

void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t getU64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void putRecord(std::string &out, const std::string &tag,
               const std::string &data) {
  uint32_t n = static_cast<uint32_t>(tag.size());
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>(n >> (8 * i)));
  out += tag;
  putU64(out, data.size());
  out += data;
}

const std::map<std::string, std::string> *&registry() {
  static const std::map<std::string, std::string> *kernels = nullptr;
  return kernels;
}

} // namespace

std::string gtc::rt::kernelKey(const std::string &source,
                               const std::string &arch) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a(source)));
  return std::string(hex) + "@" + arch;
}

std::string gtc::rt::packBundle(const Bundle &b) {
  std::string records;
  putRecord(records, "step", b.step);
  if (b.processes > 1)
    putRecord(records, "processes", std::to_string(b.processes));
  if (b.shardOptimizer)
    putRecord(records, "shard", "optimizer");
  if (b.cpu)
    putRecord(records, "devices", "cpu");
  for (const auto &[batch, plan] : b.evals)
    putRecord(records, "eval " + std::to_string(batch), plan);
  for (const std::string &arch : b.archs)
    putRecord(records, "arch " + arch, "");
  for (const auto &[key, binary] : b.kernels)
    putRecord(records, "kernel " + key, binary);
  return sealPayload(records);
}

std::string gtc::rt::sealPayload(const std::string &records) {
  std::string out = records;
  putU64(out, records.size());
  putU64(out, fnv1a(records));
  out.append(kMagic, 8);
  return out;
}

bool gtc::rt::readBundle(const std::string &path, Bundle &b,
                         std::string &error) {
  const std::string rebuild = "; rebuild it with gtc compile";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  if (file.size() < kTrailer ||
      file.compare(file.size() - 8, 8, kMagic, 8) != 0) {
    error = path + " carries no gtc payload (truncated, or not made by gtc "
                   "compile)" + rebuild;
    return false;
  }
  const char *t = file.data() + file.size() - kTrailer;
  uint64_t size = getU64(t), sum = getU64(t + 8);
  if (size > file.size() - kTrailer) {
    // (or its recorded size was damaged: the file cannot tell which)
    error = path + ": the payload is truncated or its recorded size damaged "
                   "(it says " + std::to_string(size) + " bytes, and the file "
                   "holds " + std::to_string(file.size() - kTrailer) +
            " before its trailer)" + rebuild;
    return false;
  }
  std::string_view records(file.data() + file.size() - kTrailer - size, size);
  if (fnv1a(records) != sum) {
    error = path + ": the payload's checksum does not match (the file was "
                   "modified or damaged)" + rebuild;
    return false;
  }
  b = Bundle();
  size_t p = 0;
  while (p < records.size()) {
    if (records.size() - p < 4) {
      error = path + ": a payload record is cut short" + rebuild;
      return false;
    }
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i)
      n |= static_cast<uint32_t>(static_cast<unsigned char>(records[p + i]))
           << (8 * i);
    p += 4;
    if (records.size() - p < n + 8ull) {
      error = path + ": a payload record is cut short" + rebuild;
      return false;
    }
    std::string tag(records.substr(p, n));
    p += n;
    uint64_t len = getU64(records.data() + p);
    p += 8;
    if (records.size() - p < len) {
      error = path + ": a payload record is cut short" + rebuild;
      return false;
    }
    std::string data(records.substr(p, len));
    p += len;
    if (tag == "step")
      b.step = std::move(data);
    else if (tag.rfind("eval ", 0) == 0)
      b.evals[std::atoll(tag.c_str() + 5)] = std::move(data);
    else if (tag.rfind("arch ", 0) == 0)
      b.archs.push_back(tag.substr(5));
    else if (tag.rfind("kernel ", 0) == 0)
      b.kernels[tag.substr(7)] = std::move(data);
    else if (tag == "processes")
      b.processes = std::max(1, std::atoi(data.c_str()));
    else if (tag == "shard")
      b.shardOptimizer = data == "optimizer";
    else if (tag == "devices")
      b.cpu = data == "cpu";
  }
  if (b.step.empty()) {
    error = path + ": the payload has no training step" + rebuild;
    return false;
  }
  return true;
}

void gtc::rt::setPrebuiltKernels(
    const std::map<std::string, std::string> *kernels) {
  registry() = kernels;
}

const std::map<std::string, std::string> *gtc::rt::prebuiltKernels() {
  return registry();
}
