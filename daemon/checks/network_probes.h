// The probes of the checks that touch the network: `http` (one request, its status, body and
// json expectations), `tcp` (one connect) and `port_free` (can a server bind the port now, and
// if not, which process listens on it). On the daemon's io_context; http and tcp wait without
// blocking (http_probe.h), port_free is one bind(2) and a read of /proc.
#ifndef DEPLOYD_CHECKS_NETWORK_PROBES_H_
#define DEPLOYD_CHECKS_NETWORK_PROBES_H_

#include <boost/asio/awaitable.hpp>

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

boost::asio::awaitable<CheckOutcome> ProbeHttp(const Check& check);
boost::asio::awaitable<CheckOutcome> ProbeTcp(const Check& check);
CheckOutcome ProbePortFree(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_NETWORK_PROBES_H_
