#include "util/listen_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace deployd {

std::string ListenAddress::ToString() const {
  return (ipv6 ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

std::optional<ListenAddress> ParseListenAddress(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  ListenAddress address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    address.ipv6 = true;
  }
  int number = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || number < 1 ||
      number > 65535)
    return std::nullopt;
  address.ip = std::string(host);
  address.port = number;
  if (address.ipv6) {
    in6_addr a6;
    if (::inet_pton(AF_INET6, address.ip.c_str(), &a6) != 1) return std::nullopt;
    static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    address.loopback =
        IN6_IS_ADDR_LOOPBACK(&a6) ||
        (std::memcmp(a6.s6_addr, kMapped, sizeof kMapped) == 0 && a6.s6_addr[12] == 127);
  } else {
    in_addr a4;
    if (::inet_pton(AF_INET, address.ip.c_str(), &a4) != 1) return std::nullopt;
    address.loopback = (ntohl(a4.s_addr) >> 24) == 127;
  }
  return address;
}

}  // namespace deployd
