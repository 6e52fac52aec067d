// ListenAddress: where a TCP server of deployd listens, as an operator writes it in the
// configuration — an IP address and a port, "127.0.0.1:9464" or "[::1]:9464" — never a name,
// which would need a resolver (and could resolve to another address tomorrow). Pure.
#ifndef DEPLOYD_UTIL_LISTEN_ADDRESS_H_
#define DEPLOYD_UTIL_LISTEN_ADDRESS_H_

#include <optional>
#include <string>
#include <string_view>

namespace deployd {

struct ListenAddress {
  std::string ip;  // "127.0.0.1", "::1"
  int port = 0;    // 1..65535
  bool ipv6 = false;
  bool loopback = false;  // 127.0.0.0/8, ::1, or ::ffff:127.x.y.z

  // As written: "127.0.0.1:9464", "[::1]:9464".
  std::string ToString() const;
  bool operator==(const ListenAddress&) const = default;
};

// nullopt for anything else than IPV4:PORT or [IPV6]:PORT with a port from 1 to 65535.
std::optional<ListenAddress> ParseListenAddress(std::string_view text);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_LISTEN_ADDRESS_H_
