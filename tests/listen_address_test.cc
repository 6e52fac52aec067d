#include "util/listen_address.h"

#include <catch2/catch.hpp>

using namespace deployd;

TEST_CASE("listen addresses: an IP address and a port", "[listen_address]") {
  CHECK(ParseListenAddress("127.0.0.1:9464") == ListenAddress{"127.0.0.1", 9464, false, true});
  CHECK(ParseListenAddress("127.9.8.7:1") == ListenAddress{"127.9.8.7", 1, false, true});
  CHECK(ParseListenAddress("[::1]:9464") == ListenAddress{"::1", 9464, true, true});
  CHECK(ParseListenAddress("[::ffff:127.0.0.1]:80") ==
        ListenAddress{"::ffff:127.0.0.1", 80, true, true});
  CHECK(ParseListenAddress("0.0.0.0:9464") == ListenAddress{"0.0.0.0", 9464, false, false});
  CHECK(ParseListenAddress("10.1.2.3:65535") == ListenAddress{"10.1.2.3", 65535, false, false});
  CHECK(ParseListenAddress("[::]:9464") == ListenAddress{"::", 9464, true, false});
  CHECK(ParseListenAddress("[::1]:9464")->ToString() == "[::1]:9464");
  CHECK(ParseListenAddress("127.0.0.1:9464")->ToString() == "127.0.0.1:9464");
  for (const char* bad : {"", "9464", "localhost:9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0",
                          "127.0.0.1:65536", "127.0.0.1:94x", "::1:9464", "[::1]", "[127.0.0.1]:80",
                          "127.0.0.1 :9464", "http://127.0.0.1:9464", "127.0.0.1:-1"}) {
    INFO(bad);
    CHECK_FALSE(ParseListenAddress(bad).has_value());
  }
}
