// Every command and flag of gcloud's `compute tpus` and of xpk's cluster and workload commands
// (the surface the reference lists, read from their sources) either parses or is refused with
// one line saying why and what to use instead: through the real binary, on a scratch HOME with
// no pool, so the commands that parse fail later for want of a pool or a resource, never with a
// parse error ("unknown flag", "unexpected argument", "is not a command").
#include <doctest/doctest.h>

#include "tests/support/machine.hpp"
#include "util/strings.hpp"

TEST_SUITE_BEGIN("integration");

namespace {

using Args = std::vector<std::string>;

// A parse error names the command's --help; nothing else does.
bool parse_error(const std::string& err) {
  return err.find("(see 'tpuctl") != std::string::npos;
}

size_t error_lines(const std::string& err) {
  size_t n = 0;
  for (const auto& line : tpuctl::util::split(err, '\n')) {
    n += line.rfind("tpuctl: error:", 0) == 0;
  }
  return n;
}

// Command lines that must parse (each is run; what it does after parsing is not checked here).
const std::vector<Args> k_accepted = {
    // ---- queued-resources (gcloud §1) ----
    {"queued-resources", "create", "qr-1", "--accelerator-type=v5litepod-16",
     "--runtime-version=v2-alpha-tpuv5-lite", "--node-id=n1", "--zone=us-central2-b", "--project=p",
     "--spot", "--async"},
    {"queued-resources",
     "create",
     "qr-1",
     "--type=v5p",
     "--topology=2x2x2",
     "--node-count=2",
     "--node-prefix=s",
     "--workload-type=AVAILABILITY_OPTIMIZED",
     "--runtime-version=r",
     "--guaranteed",
     "--best-effort",
     "--reserved",
     "--reservation=res-1",
     "--reservation-host-project=hp",
     "--provisioning-model=reservation_bound",
     "--max-run-duration=3h",
     "--min-duration=1h",
     "--valid-after-duration=1m",
     "--valid-until-duration=2h",
     "--network=default",
     "--subnetwork=s",
     "--internal-ips",
     "--service-account=sa@x",
     "--scopes=a,b",
     "--metadata=k=v",
     "--tags=t1,t2",
     "--labels=team=ml",
     "--description=d",
     "--boot-disk=kms-key=k",
     "--shielded-secure-boot",
     "--range=10.0.0.0/29",
     "--autocheckpoint-enabled",
     "--async"},
    {"queued-resources", "create", "qr-1", "--accelerator-type=v4-8", "--runtime-version=r",
     "--network-config=network=n,subnetwork=s", "--valid-after-time=2030-01-01T00:00:00Z",
     "--valid-until-time=2030-01-02T00:00:00Z", "--reservation-host-folder=f", "--dry-run"},
    {"queued-resources", "delete", "qr-1", "--zone=z", "--force", "--async", "--quiet"},
    {"queued-resources", "describe", "qr-1", "--zone=z", "--format=value(state.state)"},
    {"queued-resources", "list", "--zone=z", "--filter=state.state=ACTIVE", "--limit=5",
     "--page-size=10", "--sort-by=~createTime", "--format=table(name,state.state)"},
    {"queued-resources", "reset", "qr-1", "--zone=z", "--async"},
    {"queued-resources", "ssh", "alice@qr-1", "--zone=z", "--worker=all", "--node=0-1",
     "--command=hostname", "--batch-size=all", "--internal-ip", "--tunnel-through-iap",
     "--ssh-key-file=~/.ssh/k", "--force-key-file-overwrite", "--plain",
     "--strict-host-key-checking=ask", "--ssh-key-expire-after=1d", "--dry-run",
     "--output-directory=/tmp"},
    {"queued-resources", "scp", "a.txt", "qr-1:~/", "--zone=z", "--worker=all", "--node=all",
     "--recurse", "--compress", "--batch-size=8", "--ssh-key-expiration=2030-01-01",
     "--no-force-key-file-overwrite"},
    // ---- tpu-vm (gcloud §2) ----
    {"tpu-vm", "create", "node-1", "--accelerator-type=v4-8", "--version=tpu-ubuntu2204-base",
     "--preemptible", "--queue-count=2", "--image=projects/p/global/images/i", "--zone=z"},
    {"tpu-vm", "create", "node-1", "--type=v5litepod", "--topology=4x4", "--version=v", "--spot",
     "--provisioning-model=SPOT", "--metadata-from-file=startup-script=/dev/null"},
    {"tpu-vm", "delete", "node-1", "--zone=z", "--async", "--quiet"},
    {"tpu-vm", "describe", "node-1", "--zone=z", "--format=value(networkEndpoints[].ipAddress)"},
    {"tpu-vm", "list", "--zone=z", "--filter=state=READY", "--limit=unlimited", "--page-size=5",
     "--sort-by=name"},
    {"tpu-vm", "ssh", "node-1", "--zone=z", "--worker=all", "--command=echo"},
    {"tpu-vm", "ssh", "node-1", "--worker=0", "--", "echo", "hi"},
    // ssh's port forwarding (the profiling guide's and TensorBoard's tunnels)
    {"tpu-vm", "ssh", "node-1", "--zone=us-central2-b", "--ssh-flag=-4 -L 9001:localhost:9001"},
    {"tpu-vm", "ssh", "node-1", "--", "-L", "6006:localhost:6006"},
    {"queued-resources", "ssh", "q", "--ssh-flag=-N", "--ssh-flag=-R 0:localhost:80"},
    {"tpu-vm", "scp", "node-1:~/out", "./", "--worker=all", "--zone=z"},
    {"tpu-vm", "accelerator-types", "list", "--zone=z", "--sort-by=~acceleratorType"},
    {"tpu-vm", "accelerator-types", "describe", "v4-8", "--zone=z"},
    // ---- discovery and gcloud-wide flags (gcloud §3) ----
    {"accelerator-types", "list", "--zone=z", "--limit=3", "--format=csv(accelerator_type)"},
    {"accelerator-types", "describe", "v5p-8", "--zone=z", "--format=json"},
    {"topologies", "list", "--zone=z", "--filter=type=v5p", "--limit=2", "--page-size=1",
     "--sort-by=topology"},
    {"locations", "list", "--format=none"},
    {"topologies", "list", "--project=p", "--billing-project=b", "--account=a@b",
     "--impersonate-service-account=sa", "--access-token-file=/dev/null", "--configuration=default",
     "--quiet", "--verbosity=critical", "--log-http", "--user-output-enabled",
     "--no-user-output-enabled", "--trace-token=t", "-q", "--format=default"},
    // ---- xpk (§4) ----
    {"cluster",
     "create",
     "--cluster=demo",
     "--tpu-type=v6e-16",
     "--num-slices=2",
     "--on-demand",
     "--zone=z",
     "--project=p",
     "--project-number=1",
     "--skip-validation",
     "--no-dependency-auto-download",
     "--sandbox-kubeconfig",
     "--num-nodes=2",
     "--host-maintenance-interval=PERIODIC",
     "--gke-version=1.30",
     "--default-pool-cpu-machine-type=e2-standard-16",
     "--default-pool-cpu-num-nodes=6",
     "--cluster-cpu-machine-type=n1-standard-8",
     "--pathways-gce-machine-type=n2",
     "--custom-cluster-arguments=--x",
     "--custom-nodepool-arguments=--y",
     "--custom-tpu-nodepool-arguments=--z",
     "--force",
     "--private",
     "--authorized-networks=10.0.0.0/8",
     "--enable-private-endpoint",
     "--private-endpoint-subnetwork=s",
     "--enable-master-global-access",
     "--enable-workload-identity",
     "--adapt-from-ct",
     "--ignore-nodepool-creation-errors",
     "--enable-gcsfuse-csi-driver",
     "--enable-gcpfilestore-csi-driver",
     "--enable-parallelstore-csi-driver",
     "--enable-pd-csi-driver",
     "--enable-lustre-csi-driver",
     "--enable-legacy-lustre-port",
     "--managed-mldiagnostics",
     "--enable-autoprovisioning",
     "--autoprovisioning-min-chips=1",
     "--autoprovisioning-max-chips=9",
     "--create-vertex-tensorboard",
     "--tensorboard-region=r",
     "--tensorboard-name=t",
     "--enable-mtc",
     "--mtc-ramdisk-size=64Mi",
     "--mtc-gcs-bucket=b",
     "--mtc-toleration-key=k",
     "--memory-limit=1",
     "--cpu-limit=1",
     "--cluster-state-gcs-bucket=b",
     "--async"},
    {"cluster", "create", "--cluster=demo", "--device-type=v5litepod-16", "--spot"},
    {"cluster", "create", "--cluster=demo", "--tpu-type=v5p-8", "--reservation=r1,r2"},
    {"cluster", "create", "--cluster=demo", "--tpu-type=v5p-8", "--flex"},
    {"cluster", "delete", "--cluster=demo", "--zone=z", "--project=p", "--force",
     "--cluster-state-gcs-bucket=b"},
    {"cluster", "describe", "--cluster=demo", "--zone=z", "--project=p", "--dry-run"},
    {"cluster", "list", "--zone=z", "--project=p"},
    {"workload",
     "create",
     "--workload=w",
     "--cluster=demo",
     "--command=echo",
     "--tpu-type=v6e-16",
     "--num-slices=2",
     "--num-nodes=1",
     "--priority=high",
     "--max-restarts=2",
     "--restart-on-exit-codes=42,127-255",
     "--ttl-seconds-after-finished=60",
     "-tgps",
     "30",
     "--scheduler=gke.io/topology-aware-auto",
     "--docker-image=python:3.10",
     "--docker-name=jax",
     "--docker-image-pull-secret=s",
     "--env=A=1",
     "--deploy-stacktrace-sidecar",
     "--ramdisk-directory=/r",
     "--mtc-enabled",
     "--use-parallel-containers",
     "--colocated-python-sidecar-image=i",
     "--enable-debug-logs",
     "--use-vertex-tensorboard",
     "--experiment-name=e",
     "--on-demand",
     "--zone=z",
     "--project=p"},
    {"workload", "create", "--workload=w", "--cluster=demo", "--command=echo",
     "--device-type=v6e-16", "--base-docker-image=python:3.10", "--script-dir=/tmp",
     "--env-file=/dev/null", "--no-use-parallel-containers", "--spot",
     "--termination-grace-period-seconds=5", "--dry-run"},
    {"workload", "list", "--cluster=demo", "--filter-by-status=RUNNING", "--filter-by-job=w",
     "--zone=z", "--project=p"},
    {"workload", "list", "--cluster=demo", "--wait-for-job-completion=w", "--timeout=5"},
    {"workload", "delete", "--workload=w", "--cluster=demo", "--force", "--zone=z"},
    {"workload", "delete", "--cluster=demo", "--filter-by-status=FINISHED",
     "--filter-by-job=maxtext"},
    {"version", "--project=p"},
    {"info", "--cluster=c"},
    {"info", "--cluster=c", "--clusterqueue"},
    {"info", "--cluster", "c", "--localqueue"},
};

// Command lines refused with one line: why, and what to use instead (exit 2).
const std::vector<Args> k_refused = {
    {"queued-resources", "create", "q", "--accelerator-type=v4-8", "--data-disk=source=d"},
    {"queued-resources", "perform-maintenance", "q", "--node-names=a"},
    {"queued-resources", "ssh", "q", "--ssh-flag=-vvv", "--command=x"},
    {"queued-resources", "scp", "a", "q:b", "--scp-flag=-l 10"},
    {"queued-resources", "list", "--uri"},
    {"tpu-vm", "create", "n", "--accelerator-type=v4-8", "--version=v", "--data-disk=source=d"},
    {"tpu-vm", "ssh", "n", "--", "-L", "8080:localhost:8080", "-o", "ServerAliveInterval=5"},
    {"tpu-vm", "start", "n", "--zone=z"},
    {"tpu-vm", "stop", "n", "--async"},
    {"tpu-vm", "update", "n", "--update-labels=a=b"},
    {"tpu-vm", "get-guest-attributes", "n", "--query-path=a/"},
    {"tpu-vm", "attach-disk", "n", "--disk=d", "--mode=read-only"},
    {"tpu-vm", "detach-disk", "n", "--disk=d"},
    {"tpu-vm", "perform-maintenance", "n"},
    {"tpu-vm", "simulate-maintenance-event", "n", "--workers=0"},
    {"tpu-vm", "versions", "list", "--zone=z"},
    {"tpu-vm", "service-identity", "create"},
    {"versions", "list"},
    {"reservations", "list", "--zone=z"},
    {"topologies", "list", "--flatten=a"},
    {"topologies", "list", "--flags-file=f.yaml"},
    {"cluster", "create-pathways", "--cluster=c", "--tpu-type=v5p-8", "--on-demand"},
    {"cluster", "create-ray", "--cluster=c", "--ray-version=2"},
    {"cluster", "adapt", "--cluster=c"},
    {"cluster", "cacheimage", "--cluster=c", "--docker-image=i", "--tpu-type=v5p-8"},
    {"cluster", "create", "--cluster=c", "--tpu-type=v5p-8", "--super-slicing", "--num-cubes=2"},
    {"cluster", "create", "--cluster=c", "--tpu-type=v5p-8", "--enable-pathways"},
    {"cluster", "create", "--cluster=c", "--tpu-type=v5p-8", "--dry-run"},
    {"cluster", "create", "--cluster=c", "--tpu-type=v5p-8", "--spot", "--flex"},
    {"workload", "create-pathways", "--workload=w", "--cluster=c", "--tpu-type=v5p-8"},
    {"workload", "create", "--workload=w", "--cluster=c", "--command=x", "--storage=s"},
    {"workload", "create", "--workload=w", "--cluster=c", "--command=x", "--debug-dump-gcs=gs://b"},
    {"workload", "create", "--workload=w", "--cluster=c", "--command=x", "--use-pathways"},
    {"workload", "create", "--workload=w", "--cluster=c", "--command=x",
     "--output-manifest-file=m.yaml"},
    {"workload", "create", "--workload=w", "--cluster=c", "--command=x", "--docker-image=a",
     "--base-docker-image=b"},
    {"workload", "delete", "--cluster=c", "--dry-run"},
    {"storage", "attach", "s", "--type=gcsfuse", "--cluster=c"},
    {"inspector", "--cluster=c"},
};

} // namespace

TEST_CASE("surface: every gcloud compute tpus and xpk cluster/workload command line of the "
          "reference parses (it then fails for want of a pool, never for its flags)") {
  tpuctl::test::Machine m;
  for (const auto& args : k_accepted) {
    const std::string shown = tpuctl::util::join(args, " ");
    auto r = m.run(args);
    CHECK_MESSAGE(!parse_error(r.err), shown << "\n" << r.err);
    CHECK_MESSAGE(error_lines(r.err) <= 1, shown << "\n" << r.err);
  }
}

TEST_CASE("surface: what tpuctl cannot honour is refused in one line, with what to do instead") {
  tpuctl::test::Machine m;
  for (const auto& args : k_refused) {
    const std::string shown = tpuctl::util::join(args, " ");
    auto r = m.run(args);
    CHECK_MESSAGE(r.exit_code == 2, shown << "\n" << r.err);
    CHECK_MESSAGE(error_lines(r.err) == 1, shown << "\n" << r.err);
    CHECK_MESSAGE(!parse_error(r.err), shown << "\n" << r.err);
    const bool says_instead = r.err.find("instead") != std::string::npos ||
                              r.err.find("give either") != std::string::npos ||
                              r.err.find("specify only one") != std::string::npos;
    CHECK_MESSAGE(says_instead, shown << "\n" << r.err);
  }
}
