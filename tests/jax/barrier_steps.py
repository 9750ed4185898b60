# A plain multi-process program (no JAX) that steps in lockstep: every worker works a little,
# then meets the others at a barrier that worker 0 holds (TCP, on the coordinator's address),
# so no worker starts step N+1 before every worker finished step N. Prints "step N" and reports
# it on the event protocol (TPUCTL_EVENTS). For the straggler tests: a worker that is slowed (its
# host busy, its process throttled) makes every step wait for it.
#   python3 barrier_steps.py [--steps N] [--work-ms W] [--port P]
import argparse
import json
import os
import socket
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10**9)
parser.add_argument("--work-ms", type=int, default=50)
parser.add_argument("--port", type=int, default=8477)
args = parser.parse_args()
me = int(os.environ["TPUCTL_PROCESS_ID"])
count = int(os.environ["TPUCTL_NUM_PROCESSES"])
host = os.environ["JAX_COORDINATOR_ADDRESS"].rsplit(":", 1)[0].strip("[]")


def event(**fields):
    path = os.environ.get("TPUCTL_EVENTS")
    if path:
        fields.setdefault("time_ms", int(time.time() * 1000))
        with open(path, "a") as f:
            f.write(json.dumps(fields) + "\n")


def recv_byte(conn):
    b = conn.recv(1)
    if not b:
        raise SystemExit("a peer left")
    return b


if me == 0:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, args.port))
    server.listen(count)
    peers = [server.accept()[0] for _ in range(count - 1)]
else:
    for attempt in range(600):
        try:
            conn = socket.create_connection((host, args.port))
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit("worker 0 never listened")

for step in range(args.steps):
    event(event="step", step=step)
    until = time.time() + args.work_ms / 1000.0
    while time.time() < until:  # work on the CPU
        pass
    if me == 0:
        for p in peers:
            recv_byte(p)  # everyone finished this step
        for p in peers:
            p.sendall(b"g")
    else:
        conn.sendall(b"r")
        recv_byte(conn)  # go
    print(f"step {step}", flush=True)
