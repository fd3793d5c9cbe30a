//===- Files.h - Writing files safely ---------------------------*- C++ -*-===//
//
// gtc writes checkpoints, executables, logs and cache entries to a
// temporary file beside the target and renames it over the target, so that
// no reader sees half a file; and it refuses to write over the files a run
// reads (its model, its data, the running program), which a mistyped path
// would otherwise destroy.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_FILES_H
#define GTC_RUNTIME_FILES_H

#include <string>

namespace gtc::rt {

/// Creates `path` and the directories above it that are missing (best
/// effort: a write into it says what failed).
void makeDirectories(const std::string &path);

/// The temporary file this process writes beside `path` before renaming it
/// over `path` ("PATH.tmp.PID": unique to the process, so two processes
/// writing one target do not share it, and never a file the user named).
std::string tempPathBeside(const std::string &path);

/// Whether `a` and `b` name one existing file (by device and inode, so
/// through links and other spellings of the path).
bool sameFile(const std::string &a, const std::string &b);

/// The directory `path` is in: "." for a bare name, "/" at the root.
std::string directoryOf(const std::string &path);

/// Whether `a` and `b` name one file, existing or yet to be written: the
/// same existing file, or one name in one directory (by device and inode,
/// so "x" and "./x" are one target before either exists).
bool sameTarget(const std::string &a, const std::string &b);

/// The running program's file (/proc/self/exe): gtc, or a compiled
/// executable, which nothing gtc writes may replace.
std::string runningProgram();

} // namespace gtc::rt

#endif // GTC_RUNTIME_FILES_H
