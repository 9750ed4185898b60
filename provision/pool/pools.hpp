// Pools and their hosts, kept in the StateStore. A pool record holds its layout (generation,
// host size, extent); each host record holds how to reach the host (address, port, user, key,
// known_hosts), where tpuctl may write on it (workdir), its position in the host grid, labels,
// and a drain reason when an operator took it out of service. Claims (state/) say which
// queued resource holds a host.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "provision/pool/host_grid.hpp"
#include "provision/pool/pool_layout.hpp"
#include "provision/pool/projects.hpp"
#include "provision/pool/ssh_work.hpp"
#include "remote/ssh_types.hpp"
#include "state/store.hpp"
#include "util/hostlist.hpp"

namespace tpuctl::provision {

using Json = nlohmann::json;

struct PoolInfo {
  std::string name;
  PoolLayout layout;
  std::string identity_file; // default private key for the pool's hosts (local pools: their own)
  std::string known_hosts;   // default known_hosts file (local pools: their own)
  Json local;                // local pool details (address base, port, directory) or null
  int64_t created_at_ms = 0;
  // Who created it (StateStore::actor(): the etcd user on an authenticating store, else
  // "USER@HOST"); "" when made before owners were recorded.
  std::string owner;
  // Who may change the pool's hosts (add, remove, drain, undrain), its admins and the pool itself
  // (delete), besides its owner; empty: anyone (a pool of one machine, or a team that has not
  // set them).
  std::vector<std::string> admins;
  // Who may do the SSH work of its requests and workloads (ownership.hpp).
  SshWork ssh_work = SshWork::anyone;
  // Chip quotas per project (projects.hpp); a project not named is unlimited here.
  ProjectQuotas quotas;
  int64_t version = 0;
};

struct HostEntry {
  std::string name;
  std::string address;
  // Unset (0, "", ""): the ssh_config's Port, User and IdentityFile for the host, else 22, the
  // local user and ssh-agent / ~/.ssh defaults (pool/request_ssh.hpp gives the precedence).
  int port = 0;
  std::string user;          // empty: ssh_config's User, else the current user
  std::string identity_file; // empty: the pool's, else ssh_config's, else agent / ~/.ssh keys
  std::string known_hosts;   // empty: the pool's, else ~/.ssh/known_hosts
  std::string workdir;       // where tpuctl writes on the host; relative to the login directory
  // Jump hosts to reach it through ("[user@]bastion[:port][,...]", or "none" to ignore
  // ssh_config's ProxyJump); empty: ssh_config's ProxyJump for the host, if any.
  std::string proxy_jump;
  Dims coords{0, 0, 0}; // position in the pool's host grid
  std::map<std::string, std::string> labels;
  std::string drain_reason; // non-empty: drained
  bool spare = false;       // held back for repairs while free (set_spares)
  int64_t added_at_ms = 0;
  Json local; // local sshd details (pid, directory) or null
  int64_t version = 0;
};

inline constexpr const char* k_default_workdir = ".tpuctl";

Json to_json(const PoolInfo& pool);
Expected<PoolInfo> pool_from_json(const Json& doc);
Json to_json(const HostEntry& host);
Expected<HostEntry> host_from_json(const Json& doc);

// How to reach a pool host: address, port, user, key and known_hosts (the host's, else the
// pool's). Never fails.
remote::SshTarget ssh_target(const PoolInfo& pool, const HostEntry& host);

// A host of a local pool served by its own sshd on this machine: it shares this machine's
// process table and files with every other such host, so one session can stop or remove what
// runs on all of them.
bool shares_this_machine(const PoolInfo& pool, const HostEntry& host);

// Pool names: letters, digits, '-', '_', '.', starting with a letter or digit, at most 63.
Status validate_pool_name(const std::string& name);
// Label keys like Kubernetes' (letters, digits, '-', '_', '.', '/'; at most 63); values printable
// without control characters, at most 256. Parses "k=v". Errors (usage) start with `what`, the
// flag or field the label came from (e.g. "--labels").
Expected<std::pair<std::string, std::string>> parse_label(const std::string& text,
                                                          std::string_view what = "--label");

// The most labels one host or one queued resource carries, as Google Cloud allows: every list
// reads them all (100,000 labels once made every later `qr list` take seconds).
constexpr size_t k_max_labels = 64;

// Usage error when `count` labels, of `owner` ("a queued resource", "host 'n1'"), pass
// k_max_labels: names the count and the limit.
Status check_label_count(size_t count, const std::string& owner);

// Which pool a command means: `requested` when given (it must exist, else not_found listing the
// pools); otherwise the only pool; otherwise 'default' when it exists. Errors: no pools (with how
// to create one), or several and none named (listing them).
Expected<std::string> resolve_pool_name(state::StateStore& store, const std::string& requested);

Expected<PoolInfo> create_pool(state::StateStore& store, const std::string& name,
                               const PoolLayout& layout, Json local = nullptr,
                               std::string identity_file = "", std::string known_hosts = "");

Expected<std::vector<PoolInfo>> list_pools(state::StateStore& store);

struct PoolView {
  PoolInfo info;
  std::vector<HostEntry> hosts;     // by position index
  std::vector<state::Claim> claims; // by host
  HostGrid grid;
  int64_t revision = 0;
};
// The pool, its hosts and claims at one revision, with the grid filled in. Errors: not_found.
Expected<PoolView> load_pool(state::StateStore& store, const std::string& pool);

struct AddHostsOptions {
  std::string user;
  int port = 0; // 0: the spec's port, else 22
  std::string identity_file;
  std::string workdir;
  std::string proxy_jump; // checked with remote::parse_jump_spec; empty: none stored
  std::map<std::string, std::string> workdir_by_host; // overrides `workdir` per host name
  std::optional<std::string> coords;                  // "x,y[,z]": only with exactly one host
  std::map<std::string, std::string> labels;
  Json local; // set by local-up
};

// Adds hosts at the next free grid positions (x fastest) or at `coords`, all or none, in one
// transaction (safe against concurrent add-hosts). Errors: a host already in the pool, a taken
// position, no room left (naming the grid and how many positions are free), bad names.
// The refusal of hosts that do not fit a pool's grid (add-hosts, import): how many were asked,
// how many it holds and has free, that nothing was added, and what to do (usage, "pool_full").
Error pool_full_error(const std::string& pool, const PoolInfo& info, size_t hosts_now,
                      size_t asked);

Expected<std::vector<HostEntry>> add_hosts(state::StateStore& store, const std::string& pool,
                                           const std::vector<util::HostSpec>& specs,
                                           const AddHostsOptions& options);

// Removes hosts, all or none, in one transaction. Errors: not_found naming each unknown host;
// hosts_busy naming each claimed one.
Status remove_hosts(state::StateStore& store, const std::string& pool,
                    const std::vector<std::string>& hosts);

// Drains (reason non-empty) or undrains (reason empty) hosts, all or none, in one transaction;
// a drained host is never placed. One event: HOST_DRAINED/HOST_UNDRAINED for one host,
// HOSTS_DRAINED/HOSTS_UNDRAINED (detail: hosts) for several. Returns the hosts afterwards.
// Errors: not_found naming each unknown host (and a missing pool).
Expected<std::vector<HostEntry>> set_drain(state::StateStore& store, const std::string& pool,
                                           const std::vector<std::string>& hosts,
                                           const std::string& reason,
                                           state::Initiator initiator = state::Initiator::user);

// Holds `count` hosts of the pool back as spares (HostEntry::spare): never placed for ordinary
// requests, placed by repairs (node_repair.hpp) as free hosts, so a lost host's slice is whole
// again at once. More spares are taken from the free hosts nearest the grid's far corner (one
// compact block there; placement fills from the near corner, whose blocks stay whole); fewer release the ones no slice holds first. A spare a
// repair took stays a spare: it goes back to being one when its slice lets it go. One event
// (SPARES_SET, detail: count, hosts). Returns the spare hosts afterwards. Errors: auth (not a
// pool admin), usage when `count` is negative or more than the free hosts and the spares can
// give (naming both), not_found for a missing pool.
Expected<std::vector<HostEntry>> set_spares(state::StateStore& store, const std::string& pool,
                                            int count);

// Nothing when the store's actor may `action` the pool (no admins set, its owner, or one of its
// admins, as same_owner compares); else an auth error naming the admins. Errors: auth.
Status require_pool_admin(const state::StateStore& store, const PoolInfo& pool,
                          const std::string& action);

// require_pool_admin(`action`) for every pool the store holds: what a change of the whole store
// (`state restore --force`, which replaces each of them) asks. Errors: auth naming the first pool
// refused; the store's.
Status require_admin_of_every_pool(state::StateStore& store, const std::string& action);

// ssh_work_refusal() for what `owner` made in `pool`, asked by the store's actor (as the
// pool's controller when `as_controller`): nothing when it may do the SSH work, else why not.
std::optional<std::string> ssh_work_refusal(const state::StateStore& store, const PoolInfo& pool,
                                            const std::string& owner, bool as_controller);

// Sets who does the SSH work of the pool's requests and workloads (ownership.hpp), by an admin
// (require_pool_admin), recorded as POOL_SSH_WORK_SET. `controller` needs a store that holds
// elections (etcd): usage error otherwise, nothing changed. Errors: auth, usage, the store's.
Expected<PoolInfo> set_pool_ssh_work(state::StateStore& store, const std::string& pool,
                                     SshWork ssh_work);

// Sets the pool's admins (empty: anyone may change it again), checked by require_pool_admin
// first; records POOL_ADMINS_SET. Returns the pool afterwards. Errors: auth, not_found, usage (a
// blank name), the store's.
Expected<PoolInfo> set_pool_admins(state::StateStore& store, const std::string& pool,
                                   const std::vector<std::string>& admins);

// One admin's change to the pool record, in one transaction: the caller must pass
// require_pool_admin (`action` names the change: "set the quotas of"), then `change` edits the
// record (it may read the store it is given, add to the event's detail, and refuse: nothing is
// written then); the change is recorded as event `type` with `detail`. Returns the pool
// afterwards. Errors: auth, not_found, `change`'s, the store's.
using PoolChange = std::function<Status(state::StateStore&, PoolInfo&, Json& detail)>;
Expected<PoolInfo> change_pool(state::StateStore& store, const std::string& pool,
                               const std::string& action, const PoolChange& change,
                               const std::string& type, const Json& detail);

// Deletes a pool and all its records. Refused (hosts_busy, naming the claims) while hosts are
// claimed, unless `force`.
Status delete_pool(state::StateStore& store, const std::string& pool, bool force);

// An inventory file checked as a whole, before the store is looked at (see import_inventory).
struct Inventory {
  std::string pool;                     // the requested pool, else the file's pool name, else ""
  std::optional<PoolLayout> new_layout; // the file's pool layout when it describes one
  std::vector<util::HostSpec> specs;    // one per host entry, in file order
  std::vector<AddHostsOptions> options; // the entry's user, port, key, workdir, coords, labels
  std::map<std::string, int> lines;     // JSON pointer -> line, for later messages
};

// Parses and checks an inventory file's text without touching a store. Pure: no IO. Errors
// (usage): not JSON (naming the line), not an object with a "hosts" array, and every bad entry
// naming its line and field (unknown fields, a bad host, user, port, key, workdir, coords or
// label, a host listed twice, a bad pool layout); the message ends "nothing was imported".
Expected<Inventory> parse_inventory(const std::string& requested_pool, const std::string& text);

// Imports an inventory file's text: {"pool": {name?, generation, chips_per_host?, shape?}?,
// "hosts": [{"host", "user"?, "port"?, "identity_file"?, "workdir"?, "coords"?: [x,y,z],
// "labels"?: {}}]}. The pool is created when the file describes it and it does not exist.
// Any bad entry rejects the whole file, naming its line and field; nothing is imported then.
Expected<std::vector<HostEntry>> import_inventory(state::StateStore& store,
                                                  const std::string& requested_pool,
                                                  const std::string& text);

} // namespace tpuctl::provision
