//===- Store.h - The rendezvous store of a data-parallel run ----*- C++ -*-===//
//
// A small key-value store that rank 0 serves over TCP, the role PyTorch's
// TCPStore plays: set, and get that waits until the key exists (Gloo's mesh
// and NCCL's unique id are exchanged through it); a sum over every rank that
// answers once all have contributed (the host-side collectives of a GPU
// run: the stop vote, evaluation sums); and heartbeats, by which rank 0
// tells every rank which one died (its connection closed) or stopped
// answering. Private to the runtime.
//===----------------------------------------------------------------------===//

#ifndef GTC_RUNTIME_LIB_STORE_H
#define GTC_RUNTIME_LIB_STORE_H

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace gtc::rt {

/// Seconds a collective or the rendezvous waits for the others
/// (GTC_TIMEOUT, default 300).
std::chrono::seconds commTimeout();

/// A TCP socket listening on `port` (0: the kernel's choice) of every
/// address, IPv6 and IPv4; -1 with a message if it cannot.
int listeningSocket(int port, std::string &error);

/// The port a socket is bound to; 0 if it is not.
int boundPort(int fd);

/// Rank 0's side: a map, and a thread per connection answering its
/// requests (see StoreClient).
class StoreServer {
public:
  /// Serves on `port` of every address; false with a message if it cannot.
  /// A socket gtc's launcher made for rank 0 (GTC_STORE_FD) is served
  /// instead of binding the port again.
  bool listenOn(const std::string &port, std::string &error);
  /// Waits (at most `timeout`) until no connection but `keep` is open: the
  /// other ranks have read their last answers and gone.
  void waitForClients(size_t keep, std::chrono::seconds timeout);

private:
  void acceptLoop();
  void serve(int fd);
  /// The heartbeat answer: empty while every rank that ever beat is alive.
  std::string failedRank();

  int fd = -1;
  /// How long a rank may go without a heartbeat: GTC_TIMEOUT, at most 30 s.
  std::chrono::seconds stale{30};
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, std::string> map;
  /// Sums in progress: the total, contributions so far, answers left.
  struct Sum {
    std::vector<double> total;
    int arrived = 0, unanswered = 0;
  };
  std::map<std::string, Sum> sums;
  size_t connections = 0;
  /// Heartbeats: when each rank last beat; ranks that said goodbye; ranks
  /// whose heartbeat connection closed without it.
  std::map<int, std::chrono::steady_clock::time_point> lastBeat;
  std::set<int> finished, vanished;
};

/// A connection to the store; retries until the server is up or `timeout`.
/// Every request waits at most `timeout` for its answer.
class StoreClient {
public:
  bool connect(const std::string &host, const std::string &port,
               std::chrono::seconds timeout, std::string &error);
  bool set(const std::string &key, const std::string &value);
  bool get(const std::string &key, std::string &value);
  /// In place: the element-wise sum over the `ranks` callers of `key`
  /// (each key used once by every rank).
  bool sum(const std::string &key, int ranks, double *data, size_t n);
  /// Tells rank 0 that `rank` is alive; `failure` is rank 0's word on the
  /// others (empty: all well). False when rank 0 does not answer.
  bool heartbeat(int rank, std::string &failure);
  /// Tells rank 0 that `rank` finished: its connection may close.
  bool goodbye(int rank);
  /// Why the last request failed ("closed", "timed out", ...).
  std::string lastError;
  ~StoreClient();

private:
  bool request(char op, const std::string &key, const std::string *value,
               std::string *answer);
  int fd = -1;
  std::mutex mutex;
};

} // namespace gtc::rt

#endif // GTC_RUNTIME_LIB_STORE_H
