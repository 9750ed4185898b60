# Sourced by the bench scripts (store_scale.sh, provision_bench.sh), not run.
#
#   start_bench_etcd DIR ADDR CLIENT_PORT PEER_PORT
#
# Starts a one-member etcd (Debian's etcd-server, default limits) on ADDR with its data and log
# in DIR, sets etcd_pid and etcd_endpoint (ADDR:CLIENT_PORT), and waits up to 10 s for it to
# answer /health. Returns 1 when it does not (DIR/etcd.log says why); the caller kills etcd_pid.
start_bench_etcd() {
  local dir=$1 addr=$2 client=$3 peer=$4
  etcd_endpoint=$addr:$client
  etcd --name bench --data-dir "$dir/etcd" \
    --listen-client-urls "http://$etcd_endpoint" --advertise-client-urls "http://$etcd_endpoint" \
    --listen-peer-urls "http://$addr:$peer" --initial-advertise-peer-urls "http://$addr:$peer" \
    --initial-cluster "bench=http://$addr:$peer" >"$dir/etcd.log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://$etcd_endpoint/health" >/dev/null && return 0
    sleep 0.1
  done
  return 1
}
