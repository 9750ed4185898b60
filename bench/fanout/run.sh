#!/usr/bin/env bash
# SSH fan-out benchmark: tpuctl against pdsh, clush and a plain `ssh &` loop on N loopback sshd
# hosts (shared/reference/ssh-fanout.md section b). Needs root: it creates a throwaway user.
#
#   bench/fanout/run.sh [--sizes "8 32 128"] [--runs 5] [--tpuctl PATH] [--raw FILE]
#                       [--tools "tpuctl pdsh clush ssh-loop"] [--keep]
#
# What it does, and undoes on exit (also on Ctrl-C):
#   - a throwaway user (tpufanb, login shell /bin/sh, home in a scratch directory, password '*'
#     so sshd without PAM accepts its key). Every client runs as that user too, so ~/.ssh is
#     the scratch one for all tools: libssh finds ~ through getpwuid(), not $HOME, so setting
#     HOME alone would not redirect tpuctl's known_hosts or config.
#   - one sshd per host on 127.0.50.2..N+1, port 22950, each with its own ed25519 host key;
#     a client key; a known_hosts made with ssh-keyscan; a ~/.ssh/config that pins
#     KexAlgorithms curve25519-sha256 (what libssh 0.10 negotiates) for every tool.
#   - tpuctl pools fan8, fan32, fan128 in a scratch SQLite state.
# Then one warm-up run per tool (at the first size), and for each N --runs rounds in which every
# tool runs once (the order rotates each round). Each run goes through bench/fanout/measure.c
# (compiled here), which records wall time, time to first stdout byte, the CPU of the client
# process tree and the CPU of the sshd side.
# The markdown table of medians goes to stdout; progress and the raw data go to stderr/--raw.
# All tools use fan-out = N (pdsh -f, clush -f, tpuctl --batch-size; the ssh loop is unbounded);
# the tool name tpuctl@K runs tpuctl with --batch-size K instead (e.g. --tools "tpuctl tpuctl@32").
# FANBENCH_HOOK='shell code' runs once the fleet is up, before the runs, with B (the scratch
# directory), FANBENCH_USER, FANBENCH_NET and FANBENCH_PORT set: for profiling and debugging.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
sizes="8 32 128"
runs=5
tools="tpuctl pdsh clush ssh-loop"
tpuctl_bin="$repo/build/cli/tpuctl"
raw_out=""
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --tools) tools=$2; shift 2 ;;
    --tpuctl) tpuctl_bin=$2; shift 2 ;;
    --raw) raw_out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

user=tpufanb
net=127.0.50  # hosts 1-250 on 127.0.50.2-251, hosts 251-500 on 127.0.51.2-251
net2=127.0.51
port=22950
# The first n hosts as a pdsh/clush/tpuctl range: 127.0.50.[2-N+1], then 127.0.51.[2-...].
host_range() {
  local n=$1
  if ((n <= 250)); then echo "$net.[2-$((n + 1))]"; else echo "$net.[2-251],$net2.[2-$((n - 249))]"; fi
}
max_n=0
for n in $sizes; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "run.sh: --sizes: '$n' is not a number of hosts" >&2; exit 2; }
  if ((n > max_n)); then max_n=$n; fi
done
[[ $runs =~ ^[0-9]+$ ]] || { echo "run.sh: --runs: '$runs' is not a number" >&2; exit 2; }
if ((max_n < 1 || max_n > 500)); then
  echo "run.sh: sizes must be between 1 and 500 hosts (one 127.0.50.x or 127.0.51.x address each)" >&2
  exit 2
fi

log() { printf '[fanout %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { echo "run.sh: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (it creates the throwaway user '$user')"
for c in sshd ssh ssh-keygen ssh-keyscan useradd userdel cc ss setpriv; do
  command -v "$c" >/dev/null || die "'$c' not found: run scripts/deps.sh --bench"
done
for t in $tools; do
  case "$t" in
    tpuctl | tpuctl@[0-9]*) [[ -x $tpuctl_bin ]] || die "no tpuctl binary at '$tpuctl_bin': build it or pass --tpuctl" ;;
    pdsh | clush) command -v "$t" >/dev/null || die "'$t' not found: run scripts/deps.sh --bench" ;;
    ssh-loop) ;;
    *) die "unknown tool '$t' (known: tpuctl tpuctl@K pdsh clush ssh-loop)" ;;
  esac
done
if id "$user" >/dev/null 2>&1; then
  die "user '$user' already exists (a previous run killed hard?): check it is unused, then 'userdel $user'"
fi
if ss -ltnH "( sport = :$port )" | grep -qE "($net|$net2)\."; then
  die "something already listens on $net.x or $net2.x:$port"
fi

# ---------------------------------------------------------------- scratch space and cleanup
B=$(mktemp -d /tmp/tpuctl-fanbench.XXXXXX)
chmod 755 "$B"
mkdir -p "$B/srv" "$B/home/.ssh" "$B/bin" "$B/out"
sshd_pids=()
reaper_pid=""
made_user=0
made_run_sshd=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -s $B/srv/pids ]] && mapfile -t sshd_pids <"$B/srv/pids"
  if ((${#sshd_pids[@]} > 0)); then
    kill "${sshd_pids[@]}" 2>/dev/null || true
  fi
  if [[ -n $reaper_pid ]]; then
    # it exits once the listeners and every orphaned session are gone
    for ((t = 0; t < 50; ++t)); do kill -0 "$reaper_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$reaper_pid" 2>/dev/null || true
    wait "$reaper_pid" 2>/dev/null || true
  fi
  if ((made_user)); then
    # sessions of the user are children of our sshds and end with them; give the last ones a
    # moment (userdel refuses a user with running processes), then check nothing is left
    for ((t = 0; t < 50; ++t)); do pgrep -u "$user" >/dev/null 2>&1 || break; sleep 0.1; done
    if pgrep -u "$user" >/dev/null 2>&1; then
      log "warning: processes of $user survive: $(pgrep -u "$user" | tr '\n' ' ')"
    fi
    userdel "$user" 2>/dev/null || log "warning: userdel $user failed"
  fi
  ((made_run_sshd)) && rmdir /run/sshd 2>/dev/null
  if ((keep)); then
    log "kept $B"
  else
    rm -rf "$B"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT TERM

# ---------------------------------------------------------------- user, keys, configs
log "scratch $B, user $user, hosts $(host_range "$max_n"):$port"
useradd -M -d "$B/home" -s /bin/sh -U "$user"
made_user=1
usermod -p '*' "$user"
if [[ ! -d /run/sshd ]]; then
  mkdir -p /run/sshd
  made_run_sshd=1
fi

hosts=()
for ((i = 0; i < max_n; ++i)); do
  if ((i < 250)); then hosts+=("$net.$((i + 2))"); else hosts+=("$net2.$((i - 248))"); fi
done

ssh-keygen -q -t ed25519 -N '' -C fanbench -f "$B/home/.ssh/id_ed25519"
cp "$B/home/.ssh/id_ed25519.pub" "$B/home/.ssh/authorized_keys"
# ~/.ssh/config is read by ssh (pdsh, clush and the loop run ssh) and by libssh (tpuctl).
cat >"$B/home/.ssh/config" <<EOF
Host $net.* $net2.*
  Port $port
  User $user
  IdentityFile $B/home/.ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $B/home/.ssh/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel QUIET
  ConnectTimeout 10
  GSSAPIAuthentication no
  KexAlgorithms curve25519-sha256
EOF

cat >"$B/srv/sshd_config" <<EOF
AuthorizedKeysFile $B/home/.ssh/authorized_keys
AllowUsers $user
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
LogLevel ERROR
MaxStartups 1000
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
EOF

log "starting $max_n sshd"
cc -O2 -o "$B/bin/measure" "$here/measure.c"
for h in "${hosts[@]}"; do
  ssh-keygen -q -t ed25519 -N '' -C "$h" -f "$B/srv/host_$h"
done
# The listeners run under `measure --reaper` (see measure.c: it collects the CPU of session
# processes that sshd orphans); their PIDs go to $B/srv/pids, one per line.
{
  echo "for h in ${hosts[*]}; do"
  echo "  '$(command -v sshd)' -D -e -f '$B/srv/sshd_config' -o \"ListenAddress=\$h:$port\" \\"
  echo "    -o \"HostKey=$B/srv/host_\$h\" -o PidFile=none 2>>'$B/srv/sshd.log' &"
  echo "  echo \$! >>'$B/srv/pids'"
  echo "done"
  echo "wait"
} >"$B/srv/start.sh"
"$B/bin/measure" --reaper "$B/srv/reaped" -- bash "$B/srv/start.sh" &
reaper_pid=$!
for ((t = 0; ; ++t)); do
  up=$(ss -ltnH "( sport = :$port )" | grep -cE "($net|$net2)\." || true)
  if ((up == max_n)); then
    mapfile -t sshd_pids <"$B/srv/pids"
    break
  fi
  ((t < 100)) || die "only $up of $max_n sshd listen after 10 s: see $B/srv/sshd.log (--keep)"
  sleep 0.1
done
ssh-keyscan -T 5 -t ed25519 -p "$port" "${hosts[@]}" >"$B/home/.ssh/known_hosts" 2>/dev/null
[[ $(wc -l <"$B/home/.ssh/known_hosts") -eq $max_n ]] || die "ssh-keyscan did not reach every host"
chown -R "$user:$user" "$B/home"
chmod 700 "$B/home" "$B/home/.ssh"

if [[ " $tools " == *" tpuctl"* ]]; then
  cp "$tpuctl_bin" "$B/bin/tpuctl"
fi

client_env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$B/home" USER="$user" LOGNAME="$user")
as_client() { (cd "$B/home" && setpriv --reuid="$user" --regid="$user" --init-groups "${client_env[@]}" "$@"); }

state="sqlite:$B/home/state.db"
if [[ " $tools " == *" tpuctl"* ]]; then
  for n in $sizes; do
    as_client "$B/bin/tpuctl" --state "$state" pool create "fan$n" --generation v4 >/dev/null
    # shellcheck disable=SC2046 # one SPEC per /24 range
    as_client "$B/bin/tpuctl" --state "$state" --pool "fan$n" pool add-hosts $(host_range "$n" | tr ',' ' ') \
      --user "$user" --port "$port" --identity-file "$B/home/.ssh/id_ed25519" >/dev/null
  done
fi

# The command line of one tool at size n.
tool_cmd() {
  local tool=$1 n=$2 range
  range=$(host_range "$n")
  case "$tool" in
    tpuctl | tpuctl@*)
      local b=$n
      [[ $tool == tpuctl@* ]] && b=${tool#tpuctl@}
      cmd=("$B/bin/tpuctl" --state "$state" --pool "fan$n" pool ssh --command hostname
        --batch-size "$b" --strict-host-key-checking yes) ;;
    pdsh) cmd=(env PDSH_RCMD_TYPE=ssh pdsh -f "$n" -w "$range" hostname) ;;
    clush) cmd=(clush -n -f "$n" -w "$range" hostname) ;;
    ssh-loop)
      # shellcheck disable=SC2016 # $@ and $h belong to the inner sh
      cmd=(sh -c 'for h in "$@"; do ssh "$h" hostname & done; wait' sh "${hosts[@]:0:n}") ;;
  esac
}

# One measured run; appends "n tool round key=value..." to $B/results.
run_one() {
  local tool=$1 n=$2 round=$3
  tool_cmd "$tool" "$n"
  local line
  line=$(cd "$B/home" && "$B/bin/measure" --user "$user" --server-pids "$B/srv/pids" \
    --server-reaper "$B/srv/reaped" \
    --out "$B/out/$tool-$n-$round.out" --err "$B/out/$tool-$n-$round.err" -- "${client_env[@]}" "${cmd[@]}")
  echo "$n $tool $round $line" >>"$B/results"
  if [[ $line != *" lines=$n "* || $line != *" rc=0 "* ]]; then
    log "warning: $tool n=$n round $round: $line (stderr: $(head -c 300 "$B/out/$tool-$n-$round.err"))"
  fi
}

# A hook for investigations (profiling, debug logs): runs with the fleet up, before the runs.
if [[ -n ${FANBENCH_HOOK:-} ]]; then
  log "running FANBENCH_HOOK"
  B=$B FANBENCH_USER=$user FANBENCH_NET=$net FANBENCH_PORT=$port bash -c "$FANBENCH_HOOK" >&2 || true
fi

# ---------------------------------------------------------------- environment
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
read -r _ b1 <<<"$(awk '/^cpu /{print "x", $2+$3+$4+$7+$8+$9}' /proc/stat)"
sleep 3
read -r _ b2 <<<"$(awk '/^cpu /{print "x", $2+$3+$4+$7+$8+$9}' /proc/stat)"
idle_load=$(awk -v d=$((b2 - b1)) -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", d / hz / 3}')
log "background load before the runs: $idle_load cores busy (of $(nproc))"

# ---------------------------------------------------------------- runs
: >"$B/results"
start=$(date +%s)
read -r -a tl <<<"$tools"
read -r first _ <<<"$sizes"
log "warm-up at n=$first"
for t in "${tl[@]}"; do run_one "$t" "$first" 0; done
for n in $sizes; do
  for ((r = 1; r <= runs; ++r)); do
    log "n=$n: round $r/$runs"
    k=$(((r - 1) % ${#tl[@]}))
    for ((j = 0; j < ${#tl[@]}; ++j)); do
      run_one "${tl[(j + k) % ${#tl[@]}]}" "$n" "$r"
    done
  done
done
elapsed=$(($(date +%s) - start))
[[ -n $raw_out ]] && cp "$B/results" "$raw_out"

# ---------------------------------------------------------------- report
versions() {
  echo "- CPU: $cpu_model, $(nproc) vCPU; kernel $(uname -r)"
  echo "- OpenSSH: $(ssh -V 2>&1); libssh: $(dpkg-query -W -f='${Version}' libssh-4 2>/dev/null || echo '?')"
  echo "- pdsh $(dpkg-query -W -f='${Version}' pdsh 2>/dev/null || echo '-'), clustershell $(dpkg-query -W -f='${Version}' clustershell 2>/dev/null || echo '-')"
  echo "- background load measured for 3 s before the runs: $idle_load cores busy"
  echo "- $runs measured rounds per N after one warm-up round, $elapsed s in all"
}
versions
echo
# Medians of the successful runs (lines == n and rc == 0) of each (n, tool).
awk -v tools="$tools" -v sizes="$sizes" '
  function median(list,   v, m, i, j, t) {
    m = split(list, v, " ")
    for (i = 2; i <= m; ++i) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    if (m == 0) return -1
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }
  $3 == 0 { next }
  {
    n = $1; t = $2; delete f
    for (i = 4; i <= NF; ++i) { split($i, a, "="); f[a[1]] = a[2] }
    key = n SUBSEP t
    total[key]++
    if (f["lines"] != n || f["rc"] != 0) next
    ok[key]++
    wall[key] = wall[key] " " f["wall"]
    fb[key] = fb[key] " " f["first_byte"]
    cpu[key] = cpu[key] " " (f["user"] + f["sys"])
    srv[key] = srv[key] " " f["server_cpu"]
    other[key] = other[key] " " ((f["busy_cpu"] - f["user"] - f["sys"] - f["server_cpu"]) / f["wall"])
    rss[key] = rss[key] " " f["maxrss_kb"]
  }
  END {
    nt = split(tools, T, " "); ns = split(sizes, S, " ")
    print "| N | tool | wall s | first byte s | client CPU s | server CPU s | other load (cores) | max RSS MB | ok runs |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (s = 1; s <= ns; ++s) for (i = 1; i <= nt; ++i) {
      key = S[s] SUBSEP T[i]
      M[key, "wall"] = median(wall[key]); M[key, "cpu"] = median(cpu[key])
      printf "| %d | %s | %.2f | %.2f | %.3f | %.2f | %.2f | %.1f | %d/%d |\n", S[s], T[i],
        M[key, "wall"], median(fb[key]), M[key, "cpu"], median(srv[key]), median(other[key]),
        median(rss[key]) / 1024, ok[key], total[key]
    }
    if (tools !~ /(^| )tpuctl( |$)/) exit
    print ""
    print "| N | peer | tpuctl wall / peer wall | tpuctl CPU / peer CPU |"
    print "|---|---|---|---|"
    for (s = 1; s <= ns; ++s) for (i = 1; i <= nt; ++i) {
      if (T[i] ~ /^tpuctl/) continue
      x = S[s] SUBSEP "tpuctl"; y = S[s] SUBSEP T[i]
      if (M[y, "wall"] <= 0 || M[y, "cpu"] <= 0) continue
      printf "| %d | %s | %.2f | %.3f |\n", S[s], T[i], M[x, "wall"] / M[y, "wall"], M[x, "cpu"] / M[y, "cpu"]
    }
  }' "$B/results"
