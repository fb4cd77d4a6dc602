#pragma once
/// @file http_server.h
/// The HTTP/1.1 transport of `inferlab serve` (chapter 09), on Boost.Beast over Asio: what keeps
/// a slow, idle or hostile client from holding what other clients need.
///
/// Two kinds of thread. One **I/O thread** runs every connection's reads as asynchronous
/// operations — a connection waiting for its next byte holds no thread — parses each request
/// (Beast's parser: head and body limits, chunked bodies, `Expect: 100-continue`) and passes it
/// to the Router, which answers at once (`/health`, `/metrics`, a 400 or a 429: a few
/// microseconds of work) or hands back Work for a **worker thread** (a generation, which waits
/// on the engine for seconds). A worker writes its answer itself, through a ResponseWriter, and
/// gives the connection back to the I/O thread, which reads the next request: pipelined
/// requests are each answered, in order.
///
/// The limits (HttpLimits): a connection has request_timeout_s to deliver each complete request
/// — idle keep-alive time included — or it is closed (a "slowloris" client that sends one byte a
/// second holds a socket for at most that long, and no thread); at most max_connections are open
/// (one more is answered 503 and closed at once); a head over max_header_bytes is answered 431,
/// a body over max_body_bytes 413 — from Content-Length, before it is read; a write that makes
/// no progress for write_timeout_s (a client that stopped reading) ends its connection. A worker
/// asks ResponseWriter::client_gone() while it waits, so a client that left is noticed between
/// two engine steps even when nothing is being written to it (a non-streamed answer).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferlab::serving {

/// The transport's limits.
struct HttpLimits {
  double request_timeout_s = 10.0;       ///< for each complete request (head and body), idle time included
  double write_timeout_s = 10.0;         ///< a write with no progress for this long ends the connection
  int64_t max_connections = 256;         ///< open connections; one more gets 503
  size_t max_header_bytes = 16 * 1024;   ///< request line and headers; more: 431
  size_t max_body_bytes = 1 << 20;       ///< body; more: 413
  int64_t workers = 16;                  ///< threads that run Work (each holds one generation)
  double stop_grace_s = 1.0;             ///< stop() lets the Work in progress answer this long
};

/// One request, as the Router sees it.
struct HttpRequest {
  std::string method;  ///< "GET", "POST", …
  std::string path;    ///< the target without its query string
  std::string body;    ///< the whole body (at most HttpLimits::max_body_bytes)
};

/// A whole response.
struct HttpResponse {
  int status = 200;                                          ///< the status code
  std::string content_type = "application/json";             ///< Content-Type
  std::string body;                                          ///< the body
  std::vector<std::pair<std::string, std::string>> headers;  ///< more headers (Retry-After, …)
};

/// A worker's end of one connection: a whole response, or a stream of server-sent events
/// (chunked). Every call returns false once the client has gone, a write has timed out or the
/// server is stopping; the worker then stops writing and cleans up.
class ResponseWriter {
 public:
  /// The writer for socket @p fd; @p keep_alive: the request allows another on this connection.
  ResponseWriter(int fd, double write_timeout_s, bool keep_alive);

  /// Writes @p response whole.
  bool send(const HttpResponse& response);
  /// Writes the head of a 200 `text/event-stream` response (chunked, no-cache).
  bool begin_events();
  /// Writes @p data as one chunk of the event stream.
  bool write_events(std::string_view data);
  /// Ends the event stream (the last, empty chunk).
  bool end_events();
  /// True when the client has closed its end or the connection failed (checked without waiting:
  /// poll() for a hang-up, then a peek for an end of file).
  bool client_gone();
  /// True once a response has been written to its end and the connection may carry another.
  bool reusable() const { return complete_ && !failed_ && keep_alive_; }

 private:
  bool write_all(std::string_view bytes);
  int fd_;
  std::chrono::milliseconds write_timeout_;
  bool keep_alive_;
  bool failed_ = false;
  bool started_ = false;
  bool complete_ = false;
};

/// Work a worker thread runs for one request; it answers through the writer.
using HttpWork = std::function<void(ResponseWriter&)>;

/// The Router's answer: a response now (on the I/O thread), or, when `later` is set, Work for a
/// worker (`now` is then ignored).
struct HttpAnswer {
  HttpResponse now;  ///< the response, when later is empty
  HttpWork later;    ///< the work, for a request that waits on something
};

/// Maps a request to its answer. Runs on the I/O thread: it must not wait.
using HttpRouter = std::function<HttpAnswer(const HttpRequest&)>;

/// What the transport has seen (any thread).
struct HttpServerStats {
  int64_t open_connections = 0;     ///< connections open now
  int64_t refused_connections = 0;  ///< answered 503: max_connections were open
  int64_t timed_out = 0;            ///< closed because a request was not complete in time
};

/// The server: listen(), then requests flow to the Router until stop().
class HttpServer {
 public:
  /// A server for @p router within @p limits (std::invalid_argument for a limit out of range).
  HttpServer(HttpRouter router, HttpLimits limits);
  /// stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds @p host : @p port (0: any free port), starts the I/O thread and the workers, and
  /// returns the port; std::runtime_error naming the address when it cannot listen.
  int listen(const std::string& host, int port);
  /// Stops accepting, gives the Work in progress HttpLimits::stop_grace_s to finish (stop the
  /// engine first: its aborted requests are then answered 503), shuts every connection down (a
  /// worker's next write fails at once), waits for the workers' Work to return and joins the
  /// threads. Later calls do nothing.
  void stop();
  /// The counters now.
  HttpServerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferlab::serving
