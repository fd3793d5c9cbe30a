//===- Comm.h - Processes of one data-parallel run --------------*- C++ -*-===//
//
// Data parallelism: one process per device. A World says which process this
// is (from the variables of torchrun, Slurm or Open MPI, or those `gtc run
// --devices N` gives the workers it starts); a Communicator joins the others
// through a rendezvous (a small TCP key-value store that rank 0 serves at
// MASTER_ADDR:MASTER_PORT, or files in a shared directory) and runs the
// collectives: Gloo between CPU processes; NCCL between GPUs (DeviceComm,
// Nccl.h), whose host-side collectives go through rank 0's store.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_COMM_H
#define GTC_RUNTIME_COMM_H

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gtc::rt {

class DeviceComm;

/// This process's place in a data-parallel run.
struct World {
  int rank = 0, size = 1, localRank = 0;
  std::string masterAddr, masterPort;
  /// "file:DIR" (--rendezvous) or empty for TCP at masterAddr:masterPort.
  std::string rendezvous;
  /// Which launcher's variables it came from: "torchrun", "slurm",
  /// "openmpi", "gtc" (workers gtc started), or "" (one process).
  std::string launcher;
};

/// The world the environment describes (size 1 when none does), meeting
/// through `rendezvous` ("file:DIR") if given, else TCP; false with a
/// message when its variables are incomplete or inconsistent.
bool worldFromEnvironment(World &world, const std::string &rendezvous,
                          std::string &error);

/// The number of processes a data-parallel command runs, decided alike by
/// `gtc run` and compiled executables. `devices` is what the command asks
/// for: "" or "cpu" (one process), "N", or "all" (every GPU: `gpus`, or the
/// launch's processes). Under a launcher (`world.size` > 1) the launch's
/// size is the count, and an explicit other N is an error. `compiled` > 0
/// is an executable's fixed count, which `devices` and the launch must
/// match. Returns the count, or 0 with a message that says what to change.
int dataParallelProcesses(const std::string &devices, const World &world,
                          int gpus, int compiled, std::string &error);

/// Collectives among the processes of a world.
class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// In place: every process ends with the mean over processes.
  virtual void allReduceMean(float *data, size_t n) = 0;
  /// In place, the mean over processes of each tensor (pointer, elements)
  /// of a gradient bucket, in one collective call for all of them.
  virtual void
  allReduceMean(const std::vector<std::pair<float *, size_t>> &bucket) = 0;
  /// In place: every process ends with the sum over processes.
  virtual void allReduceSum(double *data, size_t n) = 0;
  /// In place: `data` holds consecutive segments of counts[r] elements, one
  /// per rank; every process ends with every rank's own segment.
  virtual void allGather(float *data, const std::vector<size_t> &counts) = 0;
  virtual void barrier() = 0;
  /// After an error: leave without the others (no goodbye, no waiting for
  /// them; NCCL's communicator aborted), so that they stop instead of
  /// waiting for this process's collectives.
  virtual void abort() {}
  /// What carries the collectives: "Gloo", "NCCL 2.28.3".
  virtual std::string describe() const = 0;
  /// The collective calls made so far (each bucket's is one).
  size_t collectiveCalls() const { return calls; }
  /// The NCCL communicator of a GPU run, for collectives on the device;
  /// null between CPU processes.
  virtual DeviceComm *device() { return nullptr; }

protected:
  size_t calls = 0;
};

/// Joins the other processes of `world` (size > 1) for CPU collectives
/// (Gloo). Null with a message naming what failed (an unreachable master, a
/// rendezvous that timed out, a build without Gloo).
std::unique_ptr<Communicator> connectCpu(const World &world,
                                         std::string &error);

/// Joins the other processes of `world` (size > 1) for GPU collectives:
/// NCCL (loaded at run time, Nccl.h), its unique id through the rendezvous,
/// on the GPU chosen for this process (selectCudaDevice, Cuda.h), which
/// must be current. A watchdog thread beats to rank 0 and, when a rank dies
/// or stops answering or NCCL reports an error, aborts the communicator and
/// ends this process with a message that names the rank. Null with a
/// message naming what failed (no NCCL, an unreachable master, a rank that
/// did not come).
std::unique_ptr<Communicator> connectGpu(const World &world,
                                         std::string &error);

/// connectGpu for `device` "cuda", else connectCpu.
std::unique_ptr<Communicator> connect(const World &world,
                                      const std::string &device,
                                      std::string &error);

/// `gtc run --devices N` on one host: starts N workers, each this program
/// with `argv` and the variables of rank r of N (MASTER_ADDR 127.0.0.1, a
/// free port), passes rank 0's standard output through and prefixes every
/// worker's standard error with "[rank r] ". When one worker fails, the
/// others are stopped. Returns the exit status to use: 0 when all
/// succeeded, else the first failure's (1 when a worker was killed).
int spawnWorkers(int n, char **argv);

} // namespace gtc::rt

#endif // GTC_RUNTIME_COMM_H
