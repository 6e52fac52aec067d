// deployd-supervise: the supervisor of one attempt (supervisor.h) as a program of its own, for
// deployd to start instead of re-executing itself. Every attempt starts one, so its start is
// part of every step's cost: this program holds only the supervisor (libc, with libstdc++ and
// Boost.JSON built in), where deployd maps a dozen shared libraries — about 3 ms to start
// against 11 ms here (tests/bench/README.md). `deployd --supervise` does the same work.
#include <boost/json/src.hpp>  // Boost.JSON compiled in: no libboost_json to load

#include "process/supervisor.h"

int main(int argc, char** argv) { return deployd::SuperviseMain(argc, argv); }
