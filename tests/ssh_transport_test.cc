#include "ctl/ssh_transport.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "test_support.h"

using namespace deployd;
using namespace deployd::ctl;

namespace {

std::string Error(const std::string& url) {
  Result<SshTarget> r = ParseSshUrl(url);
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

}  // namespace

TEST_CASE("ssh addresses: user, host and port", "[ssh_transport]") {
  Result<SshTarget> full = ParseSshUrl("ssh://root@gpu-7.example:2222");
  REQUIRE(full.ok());
  CHECK(full->user == "root");
  CHECK(full->host == "gpu-7.example");
  CHECK(full->port == 2222);
  CHECK(full->Url() == "ssh://root@gpu-7.example:2222");

  Result<SshTarget> bare = ParseSshUrl("ssh://gpu1/");
  REQUIRE(bare.ok());
  CHECK(bare->user.empty());
  CHECK(bare->port == 0);
  CHECK(bare->Url() == "ssh://gpu1");

  Result<SshTarget> v6 = ParseSshUrl("ssh://ops@[fd00::7]:22");
  REQUIRE(v6.ok());
  CHECK(v6->host == "fd00::7");
  CHECK(v6->Url() == "ssh://ops@[fd00::7]:22");
}

TEST_CASE("what is not an ssh address is refused, saying why", "[ssh_transport]") {
  const std::string expected = "; expected ssh://[USER@]HOST[:PORT])";
  CHECK(Error("gpu1") == "'gpu1' is not an ssh address (it must start with ssh://" + expected);
  CHECK(Error("ssh://") == "'ssh://' is not an ssh address (no host" + expected);
  CHECK(Error("ssh://h:0") ==
        "'ssh://h:0' is not an ssh address (the port must be a number from 1 to 65535" + expected);
  CHECK(Error("ssh://h:22x") ==
        "'ssh://h:22x' is not an ssh address (the port must be a number from 1 to 65535" +
            expected);
  CHECK(Error("ssh://h/var/run") ==
        "'ssh://h/var/run' is not an ssh address (a path is not allowed" + expected);
  CHECK(Error("ssh://-oProxyCommand=x") ==
        "'ssh://-oProxyCommand=x' is not an ssh address (the host holds odd characters" + expected);
  CHECK(Error("ssh://a b@h") ==
        "'ssh://a b@h' is not an ssh address (the user name is empty or holds spaces, quotes or "
        "slashes" +
            expected);
  CHECK(Error("ssh://[fd00::1") ==
        "'ssh://[fd00::1' is not an ssh address (no ']' after the IPv6 address" + expected);
}

TEST_CASE("the ssh command line runs the host's deployctl dial-stdio", "[ssh_transport]") {
  deployd::testing::TempDir runtime;
  ::setenv("XDG_RUNTIME_DIR", runtime.path().c_str(), 1);
  ::unsetenv("DEPLOYD_SSH_COMMAND");
  SshTarget t = ParseSshUrl("ssh://ops@gpu1:2222").value();
  std::vector<std::string> argv = SshArgv(t, "/srv/it's.sock", SshMode{.batch = true});
  REQUIRE(argv.size() > 6);
  CHECK(argv.front() == "ssh");
  CHECK(argv.back() == "deployctl --socket '/srv/it'\\''s.sock' dial-stdio");
  CHECK(argv[argv.size() - 2] == "gpu1");
  CHECK(argv[argv.size() - 3] == "--");
  auto has = [&](const std::string& a, const std::string& b) {
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == a && argv[i + 1] == b) return true;
    return false;
  };
  CHECK(has("-l", "ops"));
  CHECK(has("-p", "2222"));
  CHECK(has("-o", "BatchMode=yes"));
  CHECK(SshArgv(t, "", SshMode{}).back() == "deployctl dial-stdio");
  CHECK(has("-o", "ControlMaster=auto"));
  CHECK(has("-o", "ControlPath=" + runtime.File("deployctl-ssh") + "/%C"));
  argv = SshArgv(t, "", SshMode{.batch = true, .share = false});
  CHECK(has("-o", "ControlMaster=no"));
  CHECK(has("-o", "ControlPath=none"));

  ::setenv("DEPLOYD_SSH_COMMAND", "ssh -F /etc/fleet.conf", 1);
  argv = SshArgv(t, "", SshMode{});
  ::unsetenv("DEPLOYD_SSH_COMMAND");
  REQUIRE(argv.size() > 4);
  CHECK(argv[0] == "/bin/sh");
  CHECK(argv[2] == "ssh -F /etc/fleet.conf \"$@\"");
  CHECK(argv[3] == "ssh");
}
