"""tpuctl's start-up for Python programs on a worker: JAX sees every chip of the slice.

On a Cloud TPU VM, `import jax; jax.device_count()` counts every chip of the slice, and
`jax.distributed.initialize()` needs no arguments, because JAX detects the TPU environment. On
tpuctl's hosts JAX runs on the CPU, where none of its cluster detections fires and no variable
gives the process count. This file closes that gap. `tpuctl agent preflight` writes it into
<agent dir>/python on every worker, and every command tpuctl runs there puts that directory on
PYTHONPATH, so Python imports it at start-up (`sitecustomize`). Then:

* It chains to the sitecustomize it shadows (Debian's, a virtual environment's), as Python would
  have run that one.
* When the program imports `jax` (and only then), it registers a JAX cluster environment, first
  in JAX's detection order, that reads tpuctl's worker variables: the coordinator from
  JAX_COORDINATOR_ADDRESS, the process id and count from TPUCTL_PROCESS_ID and
  TPUCTL_NUM_PROCESSES (slice-major over every slice of the job, as on Cloud TPU multislice).
  `jax.distributed.initialize()` without arguments then works; arguments the program passes
  itself win, as they do over any detected environment.
* If the program uses JAX without calling `jax.distributed.initialize()` (the seeds' programs),
  the distributed runtime is started just before JAX's backends are: every process sees every
  device of the job, as on a TPU VM. A later call to `jax.distributed.initialize()` with no
  arguments, or the same ones, is then a no-op; other arguments get one clear error.
* A coordinator on a loopback address (a local pool, where many "hosts" share one machine) is
  bound to that address instead of JAX's default of every address, so two jobs whose worker 0
  sits on different loopback hosts do not both claim port 8476 on the machine.
* It reports to tpuctl through the worker's event file (TPUCTL_EVENTS, JSON lines, the same
  protocol a program may use itself): who started the distributed runtime and how, and the
  persistent compilation cache's hits and misses.
* SIGUSR1 makes the process write every thread's Python stack to stderr (faulthandler, as
  cloud-tpu-diagnostics does), unless the program handles SIGUSR1 itself: tpuctl asks for the
  stacks of a job that hangs (a "stack_dump" event says which pid to ask).
* An uncaught exception that says the program cannot import JAX, or that its mesh does not fit
  the slice's devices, gets one more line saying how to fix it.

Switched off by TPUCTL_JAX_INIT=0 (then tpuctl does not set PYTHONPATH either). A program that
never imports jax runs exactly as without this file: nothing here imports anything heavy, and
the import watcher removes itself once jax has been imported.
"""

import os
import sys


def _tpuctl_chain():
    """Runs the sitecustomize module this one shadows, as Python would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # as site.py reports a failing sitecustomize, then goes on
        sys.stderr.write("Error in sitecustomize (%s); set PYTHONVERBOSE for traceback:\n"
                         "%s: %s\n" % (spec.origin, type(err).__name__, err))


def _tpuctl_enabled():
    if os.environ.get("TPUCTL_JAX_INIT", "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    try:
        count = int(os.environ["TPUCTL_NUM_PROCESSES"])
        pid = int(os.environ["TPUCTL_PROCESS_ID"])
    except (KeyError, ValueError):
        return False
    return 0 <= pid < count and bool(os.environ.get("JAX_COORDINATOR_ADDRESS"))


def _tpuctl_event(kind, **fields):
    """Appends one event line to the worker's event file (one write: lines never interleave)."""
    path = os.environ.get("TPUCTL_EVENTS")
    if not path:
        return
    import json
    import time

    fields["event"] = kind
    fields["time_ms"] = int(time.time() * 1000)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(fields, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


class _TpuctlState:
    auto = None  # (coordinator, count, pid) once tpuctl started the runtime itself
    cache = {"hits": 0, "misses": 0}


def _tpuctl_is_loopback(address):
    host = address.rsplit(":", 1)[0].strip("[]")
    return host.startswith("127.") or host in ("localhost", "::1")


def _tpuctl_install(jax_module):
    """Called once `import jax` has finished: the cluster environment and the start-up hook."""
    import threading

    from jax._src import clusters, distributed, xla_bridge

    count = int(os.environ["TPUCTL_NUM_PROCESSES"])
    pid = int(os.environ["TPUCTL_PROCESS_ID"])

    class TpuctlCluster(clusters.ClusterEnv):
        """tpuctl's worker environment (TPUCTL_PROCESS_ID, TPUCTL_NUM_PROCESSES)."""

        name = "tpuctl"

        @classmethod
        def is_env_present(cls):
            return _tpuctl_enabled()

        @classmethod
        def get_coordinator_address(cls, timeout_secs, override_coordinator_port=None):
            address = os.environ["JAX_COORDINATOR_ADDRESS"]
            if override_coordinator_port:
                address = address.rsplit(":", 1)[0] + ":" + str(override_coordinator_port)
            return address

        @classmethod
        def get_process_count(cls):
            return count

        @classmethod
        def get_process_id(cls):
            return pid

        @classmethod
        def get_local_process_id(cls):
            return None  # every CPU device of the host is this process's, as a TPU VM's chips

    # First in the detection order: on a worker that also has a launcher's variables (tpuctl's
    # slurm profile sets SLURM_LOCALID=0, which JAX's Slurm detection turns into one device per
    # process), the facts tpuctl exports describe the slice.
    types = clusters.ClusterEnv._cluster_types
    if TpuctlCluster in types:
        types.remove(TpuctlCluster)
    types.insert(0, TpuctlCluster)

    original_initialize = distributed.initialize
    lock = threading.Lock()

    def initialize(*args, **kwargs):
        names = ("coordinator_address", "num_processes", "process_id")
        given = dict(zip(names, args))
        given.update({k: v for k, v in kwargs.items() if k in names})
        if _TpuctlState.auto is not None:
            coordinator, n, p = _TpuctlState.auto
            same = {"coordinator_address": coordinator, "num_processes": n, "process_id": p}
            if all(v is None or v == same[k] for k, v in given.items()):
                return None  # tpuctl already started the same runtime: nothing to do
            raise RuntimeError(
                "jax.distributed.initialize(%s) was called after the program had used JAX: "
                "tpuctl had already started JAX's distributed runtime for process %d of %d "
                "(coordinator %s). Call jax.distributed.initialize() before any other JAX call, "
                "or switch tpuctl's start-up off with --env TPUCTL_JAX_INIT=0"
                % (", ".join("%s=%r" % kv for kv in given.items()), p, n, coordinator))
        coordinator = (given.get("coordinator_address")
                       or os.environ.get("JAX_COORDINATOR_ADDRESS") or "")
        process = given.get("process_id", pid)
        if (process == 0 and coordinator and _tpuctl_is_loopback(coordinator)
                and len(args) < 9 and "coordinator_bind_address" not in kwargs
                and not os.environ.get("JAX_COORDINATOR_BIND_ADDRESS")):
            kwargs["coordinator_bind_address"] = coordinator
        result = original_initialize(*args, **kwargs)
        state = distributed.global_state
        _tpuctl_event("jax_distributed", by="program", process_id=state.process_id,
                      num_processes=state.num_processes,
                      coordinator=str(getattr(state, "coordinator_address", coordinator)))
        return result

    initialize.__doc__ = original_initialize.__doc__
    initialize.__wrapped__ = original_initialize
    distributed.initialize = initialize
    if getattr(jax_module, "distributed", None) is not None:
        jax_module.distributed.initialize = initialize

    original_backends = xla_bridge.backends

    def backends():
        if not xla_bridge._backends and distributed.global_state.client is None:
            with lock:
                if distributed.global_state.client is None and _TpuctlState.auto is None:
                    coordinator = os.environ["JAX_COORDINATOR_ADDRESS"]
                    kwargs = {}
                    if pid == 0 and _tpuctl_is_loopback(coordinator) and not os.environ.get(
                            "JAX_COORDINATOR_BIND_ADDRESS"):
                        kwargs["coordinator_bind_address"] = coordinator
                    try:
                        original_initialize(coordinator, count, pid, **kwargs)
                    except Exception as err:
                        raise RuntimeError(
                            "tpuctl: JAX's distributed runtime did not start for process %d of "
                            "%d (coordinator %s): %s" % (pid, count, coordinator, err)) from err
                    _TpuctlState.auto = (coordinator, count, pid)
                    _tpuctl_event("jax_distributed", by="tpuctl", process_id=pid,
                                  num_processes=count, coordinator=coordinator)
        return original_backends()

    backends.__wrapped__ = original_backends
    xla_bridge.backends = backends

    # Python stacks on demand, as cloud-tpu-diagnostics dumps them: SIGUSR1 writes every
    # thread's stack to stderr (the worker's log). tpuctl sends it when the job hangs; it learns
    # the pid from the event. A program with its own SIGUSR1 handler keeps it.
    try:
        import faulthandler
        import signal

        if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
            faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
            _tpuctl_event("stack_dump", signal=int(signal.SIGUSR1), pid=os.getpid())
    except Exception:
        pass

    try:
        from jax import monitoring

        def on_event(event, **_):
            if event == "/jax/compilation_cache/cache_hits":
                _TpuctlState.cache["hits"] += 1
            elif event == "/jax/compilation_cache/cache_misses":
                _TpuctlState.cache["misses"] += 1
            else:
                return
            _tpuctl_event("compile_cache", **_TpuctlState.cache)

        monitoring.register_event_listener(on_event)
    except Exception:
        pass


class _TpuctlJaxWatcher:
    """A meta path finder that waits for `import jax`, lets it finish, then installs."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        import importlib.util

        try:
            sys.meta_path.remove(self)  # one shot: found by the finders after this one
        except ValueError:
            return None  # another thread's import got here first
        spec = importlib.util.find_spec("jax")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            try:
                _tpuctl_install(module)
            except Exception as err:  # never break the program: say why and go on
                sys.stderr.write("tpuctl: JAX start-up not installed (%s: %s); pass "
                                 "jax.distributed.initialize() its arguments yourself\n"
                                 % (type(err).__name__, err))

        loader.exec_module = exec_then_install
        return spec


def _tpuctl_hint(exc_type, exc, tb, previous):
    previous(exc_type, exc, tb)
    text = str(exc)
    if isinstance(exc, ImportError) and getattr(exc, "name", "") and (
            exc.name == "jax" or exc.name.startswith(("jax.", "jaxlib", "orbax", "optax"))):
        sys.stderr.write(
            "tpuctl: %s on %s cannot import %s: install JAX in the workers' Python environment "
            "(scripts/deps.sh --frameworks), or point tpuctl at one that has it "
            "(tpuctl config set python-env DIR)\n" % (sys.executable, os.uname().nodename,
                                                     exc.name))
    elif "mesh" in text.lower() and "device" in text.lower() and _tpuctl_enabled():
        try:
            from jax._src import xla_bridge

            if not xla_bridge._backends:
                return  # JAX never started: asking it now would start it
            total, local = xla_bridge.device_count(), xla_bridge.local_device_count()
        except Exception:
            return
        sys.stderr.write(
            "tpuctl: the slice has %d JAX devices (%s processes x %d): shape the mesh so its axes "
            "multiply to %d\n" % (total, os.environ.get("TPUCTL_NUM_PROCESSES"), local, total))


_tpuctl_chain()
if _tpuctl_enabled():
    if "jax" in sys.modules:  # imported by a sitecustomize chained above: install at once
        _tpuctl_install(sys.modules["jax"])
    else:
        sys.meta_path.insert(0, _TpuctlJaxWatcher())
    _tpuctl_previous_hook = sys.excepthook
    sys.excepthook = lambda t, e, tb: _tpuctl_hint(t, e, tb, _tpuctl_previous_hook)
