// What the tests of the store share: a RunStore opened on a file, or the test fails saying why.
#ifndef DEPLOYD_TESTS_STORE_TEST_SUPPORT_H_
#define DEPLOYD_TESTS_STORE_TEST_SUPPORT_H_

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "store/run_store.h"

namespace deployd::testing {

inline std::unique_ptr<RunStore> MustOpen(const std::string& path) {
  auto store = RunStore::Open(path);
  INFO((store.ok() ? std::string() : store.status().message()));
  REQUIRE(store.ok());
  return std::move(store.value());
}

}  // namespace deployd::testing

#endif  // DEPLOYD_TESTS_STORE_TEST_SUPPORT_H_
