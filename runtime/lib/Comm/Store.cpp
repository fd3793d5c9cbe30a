//===- Store.cpp - The rendezvous store of a data-parallel run ------------===//
//
// The wire format: a request is an op byte and a key (a 64-bit length and
// its bytes), then, for 'S' (set) and 'R' (sum), a value; 'G' (get), 'R'
// and 'H' (heartbeat) are answered with one value. 'B' (goodbye) has no
// answer.
//===----------------------------------------------------------------------===//

#include "Comm/Store.h"

#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace gtc::rt;

std::chrono::seconds gtc::rt::commTimeout() {
  const char *v = std::getenv("GTC_TIMEOUT");
  char *end = nullptr;
  long s = v ? std::strtol(v, &end, 10) : 0;
  return std::chrono::seconds(v && *v && !*end && s > 0 && s < INT_MAX ? s
                                                                       : 300);
}

namespace {

bool sendAll(int fd, const void *data, size_t n) {
  const char *p = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool recvAll(int fd, void *data, size_t n) {
  char *p = static_cast<char *>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

/// A length and its bytes in one send: two small sends in a row wait for
/// the peer's delayed acknowledgement (Nagle), 40 ms each.
bool sendBlob(int fd, const std::string &s) {
  uint64_t n = s.size();
  std::string message(reinterpret_cast<const char *>(&n), sizeof n);
  message += s;
  return sendAll(fd, message.data(), message.size());
}

bool recvBlob(int fd, std::string &s) {
  uint64_t n = 0;
  if (!recvAll(fd, &n, sizeof n) || n > (uint64_t(1) << 30))
    return false;
  s.resize(n);
  return recvAll(fd, s.data(), n);
}

} // namespace

//===----------------------------------------------------------------------===//
// StoreServer
//===----------------------------------------------------------------------===//

int gtc::rt::listeningSocket(int port, std::string &error) {
  int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  int off = 0, on = 1;
  bool v6 = fd >= 0;
  if (!v6)
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    error = std::string("cannot open a socket: ") + std::strerror(errno);
    return -1;
  }
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  int rc;
  if (v6) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(fd, 128) != 0) {
    error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

int gtc::rt::boundPort(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0)
    return 0;
  if (a.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6 *>(&a)->sin6_port);
  if (a.ss_family == AF_INET)
    return ntohs(reinterpret_cast<sockaddr_in *>(&a)->sin_port);
  return 0;
}

bool StoreServer::listenOn(const std::string &port, std::string &error) {
  stale = std::min(commTimeout(), std::chrono::seconds(30));
  // gtc run --devices N made the socket before starting the workers, so no
  // other program can take the port in between.
  if (const char *inherited = std::getenv("GTC_STORE_FD")) {
    int given = std::atoi(inherited);
    ::unsetenv("GTC_STORE_FD");
    if (given > 0 && std::to_string(boundPort(given)) == port)
      fd = given;
  }
  if (fd < 0)
    fd = listeningSocket(std::atoi(port.c_str()), error);
  if (fd < 0) {
    error = "rank 0 cannot serve the rendezvous on port " + port + ": " +
            error + " (another run there? choose another MASTER_PORT)";
    return false;
  }
  std::thread([this] { acceptLoop(); }).detach();
  return true;
}

void StoreServer::acceptLoop() {
  for (;;) {
    int c = ::accept(fd, nullptr, nullptr);
    if (c < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++connections;
    }
    // Answers go out at once (a sum answers every rank each step).
    int on = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    std::thread([this, c] { serve(c); }).detach();
  }
}

void StoreServer::waitForClients(size_t keep, std::chrono::seconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait_for(lock, timeout, [&] { return connections <= keep; });
}

std::string StoreServer::failedRank() {
  auto now = std::chrono::steady_clock::now();
  for (int r : vanished)
    return "rank " + std::to_string(r) +
           " ended without finishing (an error, a crash, or killed)";
  for (auto [r, at] : lastBeat)
    if (!finished.count(r) && now - at > stale)
      return "rank " + std::to_string(r) + " has not answered for " +
             std::to_string(
                 std::chrono::duration_cast<std::chrono::seconds>(now - at)
                     .count()) +
             " s (stopped or hung)";
  return "";
}

void StoreServer::serve(int c) {
  char op;
  std::string key, value;
  int beating = -1; // the rank whose heartbeats come on this connection
  while (recvAll(c, &op, 1) && recvBlob(c, key)) {
    if (op == 'S') {
      if (!recvBlob(c, value))
        break;
      std::lock_guard<std::mutex> lock(mutex);
      map[key] = value;
      changed.notify_all();
    } else if (op == 'G') {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return map.count(key) > 0; });
      value = map[key];
      lock.unlock();
      if (!sendBlob(c, value))
        break;
    } else if (op == 'R') {
      // value: the number of ranks (int32), then the doubles to add.
      int32_t ranks = 0;
      if (!recvBlob(c, value) || value.size() < 4 ||
          (value.size() - 4) % sizeof(double) != 0)
        break;
      std::memcpy(&ranks, value.data(), 4);
      const size_t n = (value.size() - 4) / sizeof(double);
      std::unique_lock<std::mutex> lock(mutex);
      Sum &s = sums[key];
      if (s.total.empty())
        s.total.assign(n, 0.0);
      if (s.total.size() != n)
        break;
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, value.data() + 4 + i * sizeof v, sizeof v);
        s.total[i] += v;
      }
      ++s.arrived;
      ++s.unanswered;
      changed.notify_all();
      changed.wait(lock, [&] { return s.arrived >= ranks; });
      std::string answer(reinterpret_cast<const char *>(s.total.data()),
                         n * sizeof(double));
      if (--s.unanswered == 0)
        sums.erase(key);
      lock.unlock();
      if (!sendBlob(c, answer))
        break;
    } else if (op == 'H') {
      std::unique_lock<std::mutex> lock(mutex);
      beating = std::atoi(key.c_str());
      lastBeat[beating] = std::chrono::steady_clock::now();
      std::string failure = failedRank();
      lock.unlock();
      if (!sendBlob(c, failure))
        break;
    } else if (op == 'B') {
      std::lock_guard<std::mutex> lock(mutex);
      finished.insert(std::atoi(key.c_str()));
    } else {
      break;
    }
  }
  ::close(c);
  std::lock_guard<std::mutex> lock(mutex);
  if (beating >= 0 && !finished.count(beating))
    vanished.insert(beating);
  --connections;
  changed.notify_all();
}

//===----------------------------------------------------------------------===//
// StoreClient
//===----------------------------------------------------------------------===//

bool StoreClient::connect(const std::string &host, const std::string &port,
                          std::chrono::seconds timeout, std::string &error) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0) {
      error = "cannot resolve MASTER_ADDR '" + host +
              "': " + ::gai_strerror(rc);
      return false;
    }
    for (addrinfo *a = res; a && fd < 0; a = a->ai_next) {
      int s = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (s >= 0 && ::connect(s, a->ai_addr, a->ai_addrlen) == 0)
        fd = s;
      else if (s >= 0)
        ::close(s);
    }
    ::freeaddrinfo(res);
    if (fd >= 0) {
      int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      // A request waits at most `timeout` for its answer.
      timeval tv{};
      tv.tv_sec = static_cast<time_t>(timeout.count());
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      error = "no rendezvous at " + host + ":" + port + " after " +
              std::to_string(timeout.count()) +
              " s (is rank 0 running, and MASTER_ADDR/MASTER_PORT its "
              "address?)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool StoreClient::request(char op, const std::string &key,
                          const std::string *value, std::string *answer) {
  std::lock_guard<std::mutex> lock(mutex);
  errno = 0;
  // The whole request in one send.
  std::string message(1, op);
  for (const std::string *part : {&key, value}) {
    if (!part)
      continue;
    uint64_t n = part->size();
    message.append(reinterpret_cast<const char *>(&n), sizeof n);
    message += *part;
  }
  bool ok = fd >= 0 && sendAll(fd, message.data(), message.size()) &&
            (!answer || recvBlob(fd, *answer));
  if (!ok)
    lastError = errno == EAGAIN || errno == EWOULDBLOCK
                    ? "no answer within the timeout"
                    : "the connection closed";
  return ok;
}

bool StoreClient::set(const std::string &key, const std::string &value) {
  return request('S', key, &value, nullptr);
}

bool StoreClient::get(const std::string &key, std::string &value) {
  return request('G', key, nullptr, &value);
}

bool StoreClient::sum(const std::string &key, int ranks, double *data,
                      size_t n) {
  std::string value(4 + n * sizeof(double), '\0');
  int32_t r = ranks;
  std::memcpy(value.data(), &r, 4);
  std::memcpy(value.data() + 4, data, n * sizeof(double));
  std::string answer;
  if (!request('R', key, &value, &answer))
    return false;
  if (answer.size() != n * sizeof(double)) {
    lastError = "a sum of another length under the same key";
    return false;
  }
  std::memcpy(data, answer.data(), answer.size());
  return true;
}

bool StoreClient::heartbeat(int rank, std::string &failure) {
  return request('H', std::to_string(rank), nullptr, &failure);
}

bool StoreClient::goodbye(int rank) {
  return request('B', std::to_string(rank), nullptr, nullptr);
}

StoreClient::~StoreClient() {
  if (fd >= 0)
    ::close(fd);
}
