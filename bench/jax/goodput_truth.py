# The ground truth of a training run's goodput, from the program's own journal
# (tests/jax/train_orbax.py --journal: process 0's start, steps, saves and restores, on its own
# clock), by the rules of Google's ml-goodput-measurement, computed over the whole journal at
# once (no windows, no running totals): what tpuctl's incremental ledger must agree with.
#
#   python3 goodput_truth.py JOURNAL END_MS [--ended]
#
# Prints JSON: total_ms, productive_ms, goodput, the badput buckets (tpuctl's names),
# disruptions, ideal_step_ms, and first_steps (the first step's time of every process start,
# for the failure-to-first-new-step times).
#
# The rules (shared/reference/failures-and-jax.md section 3):
#   - a process start begins a segment; a step's time is the next step's start minus its own;
#   - the ideal step time is the mean of the step times (first steps excluded) up to
#     median + 3 MAD;
#   - program start-up: from the segment's start to its first step (less restores), plus what
#     its first step took beyond the ideal;
#   - a disruption ends a segment that a later one follows: the steps it ran from the later one's
#     first step number on were done again (wasted progress), and from its last step's start to
#     the next start that steps is infrastructure recovery (a start that never stepped in
#     between is recovery too, its restores excepted);
#   - blocking saves come out of productive time, restores out of start-up;
#   - the last step of the run counts only once the run ended.
import json
import statistics
import sys


def ideal_of(samples):
    if not samples:
        return 0
    v = sorted(samples)
    median = v[len(v) // 2]
    dev = sorted(abs(x - median) for x in v)
    mad = dev[len(dev) // 2]
    kept = [x for x in v if x <= median + 3 * mad]
    return int(sum(kept) / len(kept)) if kept else median


def main():
    journal, end_ms = sys.argv[1], int(sys.argv[2])
    ended = "--ended" in sys.argv[3:]
    segments = []
    with open(journal) as f:
        for line in f:
            e = json.loads(line)
            if e["event"] == "start":
                segments.append({"start": e["time_ms"], "steps": [], "save": 0, "restore": 0})
            elif not segments:
                continue
            elif e["event"] == "step":
                segments[-1]["steps"].append((e["step"], e["time_ms"]))
            elif e["event"] == "checkpoint":
                key = "save" if e["action"] == "save" else "restore"
                segments[-1][key] += int(e["seconds"] * 1000)
    stepped = [s for s in segments if s["steps"]]
    samples = []
    for s in stepped:
        t = [ms for _, ms in s["steps"]]
        samples += [b - a for a, b in zip(t[1:], t[2:])]  # not the first step
    ideal = ideal_of(samples)
    out = {"productive_ms": 0, "program_startup_ms": 0, "wasted_progress_from_disruption_ms": 0,
           "infrastructure_recovery_from_disruption_ms": 0, "unproductive_checkpoint_save_ms": 0,
           "unproductive_checkpoint_restore_ms": 0, "disruptions": 0}
    for k, s in enumerate(segments):
        out["unproductive_checkpoint_save_ms"] += s["save"]
        out["unproductive_checkpoint_restore_ms"] += s["restore"]
        later = next((x for x in segments[k + 1:] if x["steps"]), None)
        if not s["steps"]:
            if k == 0 or not any(x["steps"] for x in segments[:k]):
                nxt = segments[k + 1]["start"] if k + 1 < len(segments) else end_ms
                out["program_startup_ms"] += max(0, nxt - s["start"] - s["restore"])
            continue  # between two that stepped: the recovery's (counted below)
        steps = s["steps"]
        out["program_startup_ms"] += max(0, steps[0][1] - s["start"] - s["restore"])
        last = later is None
        closed = len(steps) - 1 + (1 if last and ended else 0)
        redo_from = later["steps"][0][0] if later else None
        productive = 0
        for i in range(closed):
            n, t = steps[i]
            took = (steps[i + 1][1] if i + 1 < len(steps) else end_ms) - t
            if i == 0:
                done = min(took, ideal) if ideal > 0 else took
                out["program_startup_ms"] += took - done
                took = done
            if redo_from is not None and n >= redo_from:
                out["wasted_progress_from_disruption_ms"] += took
            else:
                productive += took
        out["productive_ms"] += max(0, productive - s["save"])
        if later is not None:
            out["disruptions"] += 1
            out["infrastructure_recovery_from_disruption_ms"] += max(
                0, later["start"] - steps[-1][1])
    total = end_ms - segments[0]["start"] if segments else 0
    explained = sum(v for k, v in out.items() if k.endswith("_ms"))
    out["other_ms"] = max(0, total - explained)
    out["total_ms"] = max(total, explained)
    out["goodput"] = round(out["productive_ms"] / out["total_ms"], 4) if out["total_ms"] else 0
    out["ideal_step_ms"] = ideal
    out["first_steps"] = [s["steps"][0][1] for s in stepped]
    out["median_step_ms"] = int(statistics.median(samples)) if samples else 0
    print(json.dumps(out))


main()
