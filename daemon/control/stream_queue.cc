#include "control/stream_queue.h"

#include <boost/json/serialize.hpp>
#include <utility>

namespace deployd {

namespace json = boost::json;

void StreamQueue::Push(const json::object& line, bool keep) {
  const std::string type = LineType(line);
  if (type == "progress") {
    auto waiting = progress_at_.find(ProgressLineStep(line));
    if (waiting != progress_at_.end()) {
      std::string& text = items_[waiting->second].line.text;
      bytes_ -= text.size();
      text = json::serialize(line);
      bytes_ += text.size();
      return;
    }
  }
  const bool last = type == "end";
  if (full() && !keep && !last) return Count(line);
  std::string text = json::serialize(line);
  bytes_ += text.size();
  if (type == "progress") progress_at_[ProgressLineStep(line)] = items_.size();
  items_.push_back({{std::move(text), last}, std::nullopt});
}

void StreamQueue::Count(const json::object& line) {
  if (items_.empty() || !items_.back().missed) items_.push_back({{}, WireMissed{}});
  WireMissed& missed = *items_.back().missed;
  const std::string type = LineType(line);
  if (type == "event") {
    std::int64_t seq = DecodeEvent(line).seq;
    if (missed.events == 0) missed.first_seq = seq;
    missed.last_seq = seq;
    ++missed.events;
  } else if (type == "progress") {
    ++missed.progress;
  } else if (type == "data") {
    missed.bytes += static_cast<std::int64_t>(LogDataText(line).size());
  } else {
    ++missed.other;
  }
}

std::deque<StreamLine> StreamQueue::Take() {
  std::deque<StreamLine> lines;
  missed_events_ = false;
  for (Item& item : items_) {
    if (item.missed) {
      missed_events_ = missed_events_ || item.missed->events > 0;
      item.line.text = json::serialize(EncodeMissed(*item.missed));
    }
    lines.push_back(std::move(item.line));
  }
  items_.clear();
  progress_at_.clear();
  bytes_ = 0;
  return lines;
}

}  // namespace deployd
