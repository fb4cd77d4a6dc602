// `inferlab chat`'s input (tools/cli/interruptible_input.h): lines of a pipe, the last one without
// its newline, the end; a SIGINT reported before a buffered line, and one that comes while the
// reader waits ends the wait (the race a flag checked before a blocking read loses).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <future>
#include <string>
#include <thread>

#include "tools/cli/interruptible_input.h"

namespace inferlab {
namespace {

using cli::InterruptibleLines;

struct Pipe {
  int read_end = -1, write_end = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    ::close(read_end);
    close_writer();
  }
  void write(const std::string& text) const {
    EXPECT_EQ(::write(write_end, text.data(), text.size()), ssize_t(text.size()));
  }
  void close_writer() {
    if (write_end >= 0) ::close(write_end);
    write_end = -1;
  }
};

TEST(Ch08ChatInput, LinesThenTheEnd) {
  cli::catch_sigint();
  cli::sigint_flag() = 0;
  Pipe pipe;
  pipe.write("first\n\nthird, no newline");
  pipe.close_writer();
  InterruptibleLines lines(pipe.read_end);
  std::string line;
  ASSERT_EQ(lines.next(line), InterruptibleLines::Result::line);
  EXPECT_EQ(line, "first");
  ASSERT_EQ(lines.next(line), InterruptibleLines::Result::line);
  EXPECT_EQ(line, "");
  ASSERT_EQ(lines.next(line), InterruptibleLines::Result::line);
  EXPECT_EQ(line, "third, no newline");
  EXPECT_EQ(lines.next(line), InterruptibleLines::Result::end);
  EXPECT_EQ(lines.next(line), InterruptibleLines::Result::end);
}

TEST(Ch08ChatInput, ASigintComesBeforeABufferedLineAndStaysSet) {
  cli::catch_sigint();
  cli::sigint_flag() = 0;
  Pipe pipe;
  pipe.write("one\ntwo\n");
  InterruptibleLines lines(pipe.read_end);
  std::string line;
  ASSERT_EQ(lines.next(line), InterruptibleLines::Result::line);  // "two" is buffered now
  ASSERT_EQ(::raise(SIGINT), 0);                                  // the handler, not the default action
  EXPECT_EQ(cli::sigint_flag(), 1);
  EXPECT_EQ(lines.next(line), InterruptibleLines::Result::interrupted);
  EXPECT_EQ(lines.next(line), InterruptibleLines::Result::interrupted) << "reported, not cleared";
  cli::sigint_flag() = 0;  // handled (stream_reply() clears it when it aborts a reply)
  ASSERT_EQ(lines.next(line), InterruptibleLines::Result::line);
  EXPECT_EQ(line, "two");
}

TEST(Ch08ChatInput, ASigintWhileWaitingEndsTheWait) {
  cli::catch_sigint();
  cli::sigint_flag() = 0;
  Pipe pipe;  // nothing is ever written: only the signal can end the wait
  InterruptibleLines lines(pipe.read_end);
  auto waiting = std::async(std::launch::async, [&] {
    std::string line;
    return lines.next(line);
  });
  ASSERT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout) << "did not wait";
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);  // to the process: any thread may run the handler
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "the SIGINT did not end the wait";
  EXPECT_EQ(waiting.get(), InterruptibleLines::Result::interrupted);
  cli::sigint_flag() = 0;
}

}  // namespace
}  // namespace inferlab
