// The lines of deployd's streams (protocol/follow_stream.h): `follow` (snapshot, events,
// progress, end) and `logs -f` (start, data, end), as sent and as read back.
#include "protocol/follow_stream.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "protocol/answer.h"

using namespace deployd;
namespace json = boost::json;

TEST_CASE("follow stream: an event line, with the attempt only when it is live") {
  WireEvent e;
  e.run = "demo-3";
  e.seq = 4;
  e.step = "fetch";
  e.kind = "step.state";
  e.state = "running";
  e.detail = "attempt 1";
  e.at_ms = 1700000000100;
  CHECK(json::serialize(EncodeEvent(e)) ==
        R"({"type":"event","run":"demo-3","seq":4,"step":"fetch","kind":"step.state",)"
        R"("state":"running","detail":"attempt 1","at_ms":1700000000100})");
  e.seq = 0;
  e.attempt = 1;
  json::object live = EncodeEvent(e);
  CHECK(json::serialize(live) ==
        R"({"type":"event","run":"demo-3","seq":0,"step":"fetch","kind":"step.state",)"
        R"("state":"running","detail":"attempt 1","at_ms":1700000000100,"attempt":1})");
  CHECK(LineType(live) == "event");
  WireEvent back = DecodeEvent(live);
  CHECK(back.run == "demo-3");
  CHECK(back.step == "fetch");
  CHECK(back.kind == "step.state");
  CHECK(back.state == "running");
  CHECK(back.detail == "attempt 1");
  CHECK(back.at_ms == 1700000000100);
  CHECK(back.attempt == 1);
  CHECK_FALSE(DecodeEvent(EncodeEvent(WireEvent{})).attempt);
}

TEST_CASE("follow stream: a progress line carries the progress fields beside its step") {
  WireProgress p;
  p.bytes = 512;
  p.total_bytes = 2048;
  json::object line = EncodeProgressLine("dl-3", "download", p);
  CHECK(json::serialize(line) ==
        R"({"type":"progress","run":"dl-3","step":"download","bytes":512,"total_bytes":2048,)"
        R"("done":null,"total":null,"fraction":null,"rate_bps":null,"eta_s":null,)"
        R"("last_progress_at_ms":0,"at_ms":0})");
  CHECK(ProgressLineStep(line) == "download");
  CHECK(DecodeProgress(line).total_bytes == 2048);
}

TEST_CASE("follow stream: snapshot and end lines carry the run") {
  WireRun run;
  run.id = "demo-3";
  run.state = "succeeded";
  json::object snapshot = EncodeSnapshotLine(run);
  CHECK(snapshot.at("ok") == true);
  CHECK(LineType(snapshot) == "snapshot");
  CHECK(LineRun(snapshot).id == "demo-3");
  json::object end = EncodeEndLine(run);
  CHECK(json::serialize(end).rfind(R"({"type":"end","run":{"id":"demo-3",)", 0) == 0);
  CHECK(LineRun(end).state == "succeeded");
  CHECK(LineRun(json::object{{"type", "end"}}).id.empty());
}

TEST_CASE("follow stream: the lines of logs -f") {
  CHECK(json::serialize(EncodeLogStart("demo-3", "fetch", "/var/lib/deployd/logs/x.log")) ==
        R"({"ok":true,"type":"start","run":"demo-3","step":"fetch",)"
        R"("path":"/var/lib/deployd/logs/x.log"})");
  json::object data = EncodeLogData("50%\r");
  CHECK(json::serialize(data) == R"({"type":"data","text":"50%\r"})");
  CHECK(LogDataText(data) == "50%\r");
  CHECK(json::serialize(EncodeLogEnd("demo-3", "fetch", "succeeded")) ==
        R"({"type":"end","run":"demo-3","step":"fetch","state":"succeeded"})");
}

TEST_CASE("answer: ok, a refusal, and how a client tells them apart") {
  CHECK(json::serialize(OkAnswer()) == R"({"ok":true})");
  json::object refusal = ErrorAnswer("no run 'x'");
  CHECK(json::serialize(refusal) == R"({"ok":false,"error":"no run 'x'"})");
  CHECK(IsRefusal(refusal));
  CHECK_FALSE(IsRefusal(OkAnswer()));
  CHECK_FALSE(IsRefusal(json::object{{"type", "event"}}));
}
