#include "engine/journal_follower.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "process/child_process.h"

namespace deployd {

JournalFollower::JournalFollower(std::shared_ptr<Gate> gate, std::shared_ptr<ChildProcess> child)
    : gate_(std::move(gate)), child_(std::move(child)) {}

JournalFollower::~JournalFollower() = default;

Result<std::unique_ptr<JournalFollower>> JournalFollower::Start(
    boost::asio::any_io_executor ex, const std::string& unit, const std::string& log_path,
    std::uint64_t log_cap_bytes, const std::string& run_id, LineHandler on_line) {
  SpawnOptions options;
  options.argv = {"journalctl", "-u", unit, "-f", "-n", "0", "-o", "cat"};
  options.log_path = log_path;
  options.log_cap_bytes = log_cap_bytes;
  auto gate = std::make_shared<Gate>();
  auto gated = [gate, on_line = std::move(on_line)](std::string_view line) {
    if (!gate->armed) {
      gate->armed = line.starts_with("Started ");
      return;
    }
    on_line(line);
  };
  auto on_exit = [run_id, unit](const ExitStatus& status) {
    if (!status.ok() && status.signal != SIGTERM)
      spdlog::warn("{}: journalctl -u {} ended: {}", run_id, unit, status.ToString());
  };
  Result<std::shared_ptr<ChildProcess>> child =
      ChildProcess::Start(ex, options, std::move(gated), std::move(on_exit));
  if (!child.ok()) return child.status();
  return std::unique_ptr<JournalFollower>(new JournalFollower(gate, child.value()));
}

void JournalFollower::Arm() { gate_->armed = true; }

void JournalFollower::Stop() { child_->Terminate(std::chrono::seconds(1)); }

}  // namespace deployd
