#include "runtime/serving/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "common/json.h"

namespace inferlab::serving {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

std::chrono::milliseconds milliseconds_of(double seconds) {
  return std::chrono::milliseconds(int64_t(seconds * 1000.0));
}

// The bytes of @p response: status line, headers, body.
std::string serialize(const HttpResponse& response, bool keep_alive) {
  http::response<http::string_body> message{http::int_to_status(unsigned(response.status)), 11};
  message.set(http::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) message.set(name, value);
  message.body() = response.body;
  message.keep_alive(keep_alive);
  message.prepare_payload();
  std::ostringstream out;
  out << message;
  return out.str();
}

HttpResponse error_response(int status, const std::string& message) {
  // OpenAI's error object; the transport knows no more about the API than this.
  const Json error{{"error",
                    {{"message", message},
                     {"type", status == 503 ? "unavailable_error" : "invalid_request_error"},
                     {"param", nullptr},
                     {"code", nullptr}}}};
  return {status, "application/json", error.dump(-1, ' ', false, Json::error_handler_t::replace), {}};
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// ResponseWriter: plain non-blocking send() with poll() for the deadline, on a socket that no
// asynchronous operation touches while a worker holds it.

ResponseWriter::ResponseWriter(int fd, double write_timeout_s, bool keep_alive)
    : fd_(fd), write_timeout_(milliseconds_of(write_timeout_s)), keep_alive_(keep_alive) {}

bool ResponseWriter::write_all(std::string_view bytes) {
  if (failed_) return false;
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      bytes.remove_prefix(size_t(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      const int ready = ::poll(&p, 1, int(write_timeout_.count()));
      if (ready > 0 && (p.revents & POLLOUT) != 0 && (p.revents & (POLLERR | POLLHUP)) == 0) continue;
      if (ready < 0 && errno == EINTR) continue;
    }
    failed_ = true;  // an error, a hang-up, or no progress within the write timeout
    return false;
  }
  return true;
}

bool ResponseWriter::send(const HttpResponse& response) {
  if (started_) throw std::logic_error("ResponseWriter::send: a response was already begun");
  started_ = true;
  complete_ = write_all(serialize(response, keep_alive_));
  return complete_;
}

bool ResponseWriter::begin_events() {
  if (started_) throw std::logic_error("ResponseWriter::begin_events: a response was already begun");
  started_ = true;
  http::response<http::empty_body> head{http::status::ok, 11};
  head.set(http::field::content_type, "text/event-stream");
  head.set(http::field::cache_control, "no-cache");
  head.keep_alive(keep_alive_);
  head.chunked(true);
  std::ostringstream out;
  out << head.base();
  return write_all(out.str());
}

bool ResponseWriter::write_events(std::string_view data) {
  if (data.empty()) return !failed_;
  std::ostringstream chunk;  // one send: the size line, the data, the chunk's end
  chunk << std::hex << data.size() << "\r\n" << data << "\r\n";
  return write_all(chunk.str());
}

bool ResponseWriter::end_events() {
  complete_ = write_all("0\r\n\r\n");
  return complete_;
}

bool ResponseWriter::client_gone() {
  if (failed_) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return failed_ = true;
  char byte = 0;  // readable: a pipelined request (still here) or an end of file (gone)
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) failed_ = true;
  return failed_;
}

// ----------------------------------------------------------------------------------------------
// The server.

struct HttpServer::Impl {
  class Connection;

  Impl(HttpRouter r, HttpLimits l) : router(std::move(r)), limits(l) {}

  HttpRouter router;
  HttpLimits limits;

  std::mutex jobs_mutex;
  std::condition_variable jobs_ready;
  std::deque<std::function<void()>> jobs;
  bool stopping = false;  // with jobs_mutex
  bool stopped = false;   // stop() has run (one thread calls it)

  std::mutex connections_mutex;
  std::unordered_set<Connection*> connections;  // the open ones, for stop()
  std::atomic<int64_t> open = 0, refused = 0, timed_out = 0;
  std::atomic<int64_t> busy_workers = 0;

  // After what the connections use: the handlers io still holds (and their connections) are
  // destroyed with it.
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread io_thread;
  std::vector<std::thread> workers;

  void accept();
  void refuse(tcp::socket socket);
  void submit(std::function<void()> job);
  void work();
};

class HttpServer::Impl::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Impl& server, tcp::socket socket) : server_(server), stream_(std::move(socket)) {
    fd_ = stream_.socket().native_handle();
    const std::lock_guard lock(server_.connections_mutex);
    server_.connections.insert(this);
    ++server_.open;
  }
  ~Connection() {
    const std::lock_guard lock(server_.connections_mutex);
    server_.connections.erase(this);
    --server_.open;
  }

  // Ends reads and writes at once (the workers' next send fails); from stop(), any thread.
  void shut_down() const { ::shutdown(fd_, SHUT_RDWR); }

  void read_next() {
    parser_.emplace();
    parser_->header_limit(uint32_t(server_.limits.max_header_bytes));
    parser_->body_limit(uint64_t(server_.limits.max_body_bytes));
    stream_.expires_after(milliseconds_of(server_.limits.request_timeout_s));  // head and body: one deadline
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

 private:
  void on_header(beast::error_code ec) {
    if (ec) return on_error(ec);
    const auto& head = parser_->get();
    if (beast::iequals(head[http::field::expect], "100-continue")) {  // curl's, for bodies over 1 KiB
      auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(stream_, net::buffer(*interim), [self = shared_from_this(), interim](beast::error_code e, size_t) {
        if (e) return;
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_request(ec); });
  }

  void on_error(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      ++server_.timed_out;  // the stream has closed the socket
      return;
    }
    if (ec == http::error::body_limit)
      return reply_and_close(error_response(413, "the request body is larger than this server's limit of " +
                                                     std::to_string(server_.limits.max_body_bytes) +
                                                     " bytes (inferlab serve --max-body-bytes)"));
    if (ec == http::error::header_limit)
      return reply_and_close(error_response(431, "the request head is larger than " +
                                                     std::to_string(server_.limits.max_header_bytes) + " bytes"));
    if (ec.category() == beast::error_code(http::error::end_of_stream).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message)
      return reply_and_close(error_response(400, "malformed HTTP request: " + ec.message()));
    // An end of stream, a reset, an operation cancelled by stop(): nothing to answer.
    close();
  }

  void on_request(beast::error_code ec) {
    if (ec) return on_error(ec);
    stream_.expires_never();
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    HttpRequest request;
    request.method = std::string(message.method_string());
    const std::string_view target(message.target().data(), message.target().size());
    request.path = std::string(target.substr(0, target.find('?')));
    request.body = std::move(message.body());
    const bool keep_alive = message.keep_alive();
    HttpAnswer answer;
    try {
      answer = server_.router(request);
    } catch (const std::exception& e) {
      answer = {error_response(500, e.what()), {}};
    }
    if (!answer.later) return reply(answer.now, keep_alive);
    // A worker writes the answer; the connection is not read meanwhile (a pipelined request
    // waits in the socket and the buffer), then it comes back to this thread.
    server_.submit([self = shared_from_this(), work = std::move(answer.later), keep_alive] {
      ResponseWriter writer(self->fd_, self->server_.limits.write_timeout_s, keep_alive);
      try {
        work(writer);
      } catch (...) {  // the work answers its own errors; one that escapes ends the connection
      }
      const bool again = writer.reusable();
      net::post(self->server_.io, [self, again] { again ? self->read_next() : self->close(); });
    });
  }

  void reply(const HttpResponse& response, bool keep_alive) {
    auto bytes = std::make_shared<std::string>(serialize(response, keep_alive));
    stream_.expires_after(milliseconds_of(server_.limits.write_timeout_s));
    net::async_write(stream_, net::buffer(*bytes),
                     [self = shared_from_this(), bytes, keep_alive](beast::error_code ec, size_t) {
                       if (!ec && keep_alive) return self->read_next();
                       self->close();
                     });
  }

  void reply_and_close(const HttpResponse& response) { reply(response, false); }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  Impl& server_;
  beast::tcp_stream stream_;
  int fd_ = -1;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(io, [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (!acceptor.is_open()) return;  // stop()
    } else if (open.load() >= limits.max_connections) {
      refuse(std::move(socket));
    } else {
      std::make_shared<Connection>(*this, std::move(socket))->read_next();
    }
    accept();
  });
}

// One connection too many: 503 in one non-blocking write (a new socket's buffer holds it), closed.
void HttpServer::Impl::refuse(tcp::socket socket) {
  ++refused;
  const std::string bytes =
      serialize(error_response(503, "the server has " + std::to_string(limits.max_connections) +
                                        " connections open, its limit: retry later"),
                false);
  [[maybe_unused]] const ssize_t sent =
      ::send(socket.native_handle(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

void HttpServer::Impl::submit(std::function<void()> job) {
  {
    const std::lock_guard lock(jobs_mutex);
    if (stopping) return;  // the job (and what it holds) is dropped; its connection is closing
    jobs.push_back(std::move(job));
  }
  jobs_ready.notify_one();
}

void HttpServer::Impl::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(jobs_mutex);
      jobs_ready.wait(lock, [this] { return stopping || !jobs.empty(); });
      if (jobs.empty()) return;  // stopping, nothing left
      job = std::move(jobs.front());
      jobs.pop_front();
      ++busy_workers;
    }
    job();
    --busy_workers;
  }
}

HttpServer::HttpServer(HttpRouter router, HttpLimits limits) : impl_(std::make_unique<Impl>(std::move(router), limits)) {
  if (!(limits.request_timeout_s > 0) || !(limits.write_timeout_s > 0))
    throw std::invalid_argument("HttpServer: the timeouts must be > 0");
  if (limits.max_connections < 1 || limits.workers < 1 || limits.max_header_bytes < 256 || limits.max_body_bytes < 1)
    throw std::invalid_argument("HttpServer: max_connections and workers must be ≥ 1, max_header_bytes ≥ 256, "
                                "max_body_bytes ≥ 1");
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::listen(const std::string& host, int port) {
  Impl& s = *impl_;
  if (s.io_thread.joinable() || s.stopped) throw std::logic_error("HttpServer::listen: called twice");
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw std::runtime_error("cannot listen on " + host + ": not an IP address (" + ec.message() + ")");
  const tcp::endpoint endpoint(address, uint16_t(port));
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  const int bound = s.acceptor.local_endpoint().port();
  for (int64_t i = 0; i < s.limits.workers; ++i) s.workers.emplace_back([&s] { s.work(); });
  s.accept();
  s.io_thread = std::thread([&s] { s.io.run(); });
  return bound;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  {
    const std::lock_guard lock(s.jobs_mutex);
    s.stopping = true;
    s.jobs.clear();  // not begun: dropped (their connections are shut down below)
  }
  s.jobs_ready.notify_all();
  net::post(s.io, [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
  });
  // A grace period for the work in progress to answer (a shutdown's 503 or the end of a stream)…
  const auto grace_end = std::chrono::steady_clock::now() + milliseconds_of(s.limits.stop_grace_s);
  while (s.busy_workers.load() > 0 && std::chrono::steady_clock::now() < grace_end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {  // … then every connection: reads end, a worker's next write fails
    const std::lock_guard lock(s.connections_mutex);
    for (const Impl::Connection* c : s.connections) c->shut_down();
  }
  for (std::thread& t : s.workers) t.join();
  s.io.stop();
  if (s.io_thread.joinable()) s.io_thread.join();
}

HttpServerStats HttpServer::stats() const {
  return {impl_->open.load(), impl_->refused.load(), impl_->timed_out.load()};
}

}  // namespace inferlab::serving
