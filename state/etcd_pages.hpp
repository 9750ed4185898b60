// Host records and host claims on etcd, kept in pages: what lets one etcd transaction claim,
// add or remove any number of a pool's hosts.
//
// Why pages. etcd bounds one transaction to --max-txn-ops (128) compares and as many writes, and
// one request to --max-request-bytes (1.5 MiB). With one key per host claim, an all-or-nothing
// claim of N hosts needs N compares, so no slice above 125 hosts could be placed on a default
// etcd (a v5p-2048 is 256 hosts, a whole tpu7x pod 2,304). Here a pool's hosts are spread over a
// fixed k_pages_per_pool pages by a hash of the host name, and its claims over as many claim
// pages by the same hash: `hosts/<pool>/<NN>` and `claims/<pool>/<NN>` (state/etcd_keys.hpp).
// A page is one etcd key, so a commit touching any number of hosts touches at most 16 host
// pages and 16 claim pages: at most 32 compares and 32 writes, whatever the slice's size. Claims
// stay all-or-nothing (one txn), can never be doubled (the txn compares every claim page it
// read), and a lost reply is settled by the commit marker as for every commit.
//
// This is Kubernetes' RangeAllocation design (one allocation document guarded by its
// resourceVersion), sharded in 16 so that small commits rewrite little and contend little.
//
// Versions. Every host record and claim still has its own version, as the StateStore interface
// promises: the revision of the commit that last changed it. A page entry stores it as "v"
// (and "c" for the revision that created it, "r" for a claim's revision); 0 (absent) means
// "the revision of the commit that last wrote this page", i.e. the page key's mod_revision, which
// is unknown until that commit lands. When a later commit rewrites the page, entries it leaves
// alone are written with their resolved numbers. decode_*() resolves the zeros, so readers only
// ever see real revisions.
//
// Size. Host pages factor out the fields every host of the page has in common ("common"), so a
// pool of hosts that differ only in name, address, position and work directory costs ~120 bytes
// a host instead of ~330; a claim page groups its claims by owner, ~13 bytes a host (measured
// by tests/unit/state/test_etcd_pages.cpp: a 2,304-host pod is 282 KB of host pages and 30 KB
// of claim pages). Limits on a default etcd:
//  * one commit's keys and values must fit in one request (1.5 MiB less framing): a bulk change
//    of ~9,000 such hosts at once (a change rewrites the whole pages it touches), and a claim of
//    far more (~100,000 hosts of claim pages);
//  * a page is rewritten whole by any change to one of its hosts: at 2,304 hosts a host page is
//    ~18 KB and a claim page ~2 KB; at ~50,000 hosts a host page nears 400 KB a write, and a
//    page must itself fit one request (~12,000 such hosts a page, ~190,000 a pool). A pool's
//    grid bounds it long before: the largest is a tpu7x pod with one chip a host, 9,216 hosts
//    (2,304 with the default four), which pages hold with room to spare;
//  * commits that touch the same page are serialized by its compare: writers to one pool's hosts
//    and claims retry each other. Measured (bench/store_scale.sh, one etcd member, 2 cores, a
//    2,304-host pool): ~550 claim-or-release commits a second from one writer, ~1,250 from
//    eight, against ~6,800 on SQLite.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "state/etcd_wire.hpp"
#include "state/store.hpp"

namespace tpuctl::state::etcd {

// Pages per pool and family. Part of the layout (schema 2): changing it needs a new schema.
inline constexpr int k_pages_per_pool = 16;

// The page (0 .. k_pages_per_pool-1) of `host`: FNV-1a of its name.
int page_of(std::string_view host);

// One host record in a host page. version/create_revision 0: written by the commit that writes
// the page (see above); decode resolves them.
struct PagedRecord {
  Json doc = Json::object();
  int64_t version = 0;
  int64_t create_revision = 0;
};
using HostPage = std::map<std::string, PagedRecord>; // by host name

// One claim in a claim page; revision 0 as above.
struct PagedClaim {
  std::string owner;
  int64_t claimed_at_ms = 0;
  int64_t expires_at_ms = 0; // 0: never
  int64_t revision = 0;
  bool live(int64_t now_ms) const { return expires_at_ms == 0 || expires_at_ms > now_ms; }
};
using ClaimPage = std::map<std::string, PagedClaim>; // by host name

// {"common":{...},"hosts":{"<name>":{"d":{...},"v":N,"c":N}}}; zero v and c are left out.
std::string encode_host_page(const HostPage& page);
// The page in `kv`, its zero revisions resolved to kv.mod_revision. Errors: k_unavailable
// naming the key when the value is not a host page.
Expected<HostPage> decode_host_page(const KeyValue& kv);

// {"groups":[{"owner":..,"at":ms,"exp":ms,"r":N,"hosts":[...]}]}: claims grouped by owner,
// time, expiry and revision (zero exp and r left out).
std::string encode_claim_page(const ClaimPage& page);
Expected<ClaimPage> decode_claim_page(const KeyValue& kv);

// The bytes one request carrying these keys and values costs etcd (its --max-request-bytes
// counts the protobuf, not the gateway's base64 JSON): the raw sizes plus a small overhead per op.
size_t request_bytes(std::string_view key, std::string_view value);

} // namespace tpuctl::state::etcd
