// provision::same_owner, the pure rule for who is the same person: an authenticated etcd user
// is compared whole; an unauthenticated "USER@HOST" is the same person on any host.
#include <doctest/doctest.h>

#include "provision/pool/ownership.hpp"

using tpuctl::provision::same_owner;

TEST_SUITE_BEGIN("provision");

TEST_CASE("same_owner: the same etcd user, or the same machine user on any host") {
  CHECK(same_owner("alice", "alice"));
  CHECK_FALSE(same_owner("alice", "bob"));
  CHECK(same_owner("alice@laptop", "alice@ci-runner-3"));
  CHECK_FALSE(same_owner("alice@laptop", "bob@laptop"));
  // An etcd user and a machine identity of the same name are not the same proof.
  CHECK_FALSE(same_owner("alice", "alice@laptop"));
  CHECK_FALSE(same_owner("alice@laptop", "alice"));
  CHECK_FALSE(same_owner("alice@laptop", "alicex@laptop"));
}

TEST_SUITE_END();
