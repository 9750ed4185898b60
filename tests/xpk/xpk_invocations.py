"""xpk's own parser as the oracle for tpuctl's xpk surface (tests/integration/test_xpk_parser.cpp).

Loads the argparse tree of the installed xpk (scripts/deps.sh --frameworks puts a pinned one in
/opt/tpuctl/xpk) and prints, as JSON lines, one invocation per flag of `cluster create|delete|
describe|list` and `workload create|delete|list`: the subcommand's required flags plus that flag
with a value of the right arity, each invocation checked to parse with xpk's parser itself
(values are tried from a list until xpk accepts one). With --docs DIR, it also prints every
cluster and workload command line of the Markdown files under DIR that xpk's parser accepts.

  python3 xpk_invocations.py --cluster C --workload W --tpu-type T [--docs DIR]

Each line: {"command": "cluster create", "flag": "--num-slices", "argv": [...], "without":
[...]} (argv without the leading "xpk"; "without": the same line without the flag, null when
xpk needs the flag); the first line is {"xpk_version": ...}.
"""
import argparse
import contextlib
import io
import json
import os
import re
import shlex
import sys

from xpk.parser.core import set_parser

try:
    from importlib.metadata import version as _version
    XPK_VERSION = _version("xpk")
except Exception:  # pragma: no cover
    XPK_VERSION = "unknown"

COMMANDS = [("cluster", "create"), ("cluster", "delete"), ("cluster", "describe"),
            ("cluster", "list"), ("workload", "create"), ("workload", "delete"),
            ("workload", "list")]


def subparsers(parser):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices
    return {}


def parses(parser, argv):
    """True when xpk's parser accepts argv (argparse exits on an error: caught, silenced)."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
            return True
        except SystemExit:
            return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--tpu-type", required=True)
    ap.add_argument("--docs", default="")
    args = ap.parse_args()

    root = argparse.ArgumentParser(prog="xpk")
    set_parser(root)
    top = subparsers(root)
    print(json.dumps({"xpk_version": XPK_VERSION}))
    samples = {"--cluster": args.cluster, "--workload": args.workload, "--tpu-type": args.tpu_type,
               "--command": "true", "--num-slices": "1", "--priority": "medium",
               "--max-restarts": "1", "-tgps": "5", "--zone": "us-central2-b",
               "--project": "demo-project", "--env": "A=1", "--docker-image": "python:3.11",
               "--filter-by-status": "EVERYTHING", "--timeout": "5",
               "--authorized-networks": "10.0.0.0/24"}
    generic = ["1", "demo", "us-central2-b", "10.0.0.0/8", "true", "python:3.11", "A=1",
               "EVERYTHING", "v5litepod-16", "/tmp"]
    for group, name in COMMANDS:
        parser = subparsers(top[group]).get(name)
        if parser is None:
            continue
        actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
        required = []
        for a in actions:
            if a.required and a.option_strings:
                required += [a.option_strings[0], samples.get(a.option_strings[0], "x")]
        # Commands that need one of a group (cluster create: --tpu-type or --device-type) get
        # --tpu-type, unless the flag tried is the other member.
        extra = []
        if not parses(root, [group, name] + required) and any(
                "--tpu-type" in a.option_strings for a in actions):
            extra = ["--tpu-type", args.tpu_type]
        for a in actions:
            if not a.option_strings:
                continue
            flag = a.option_strings[0]
            base = [group, name] + required
            if a.required:
                tries = [base + extra, base]
            else:
                if a.nargs == 0:
                    cands = [[]]
                else:
                    values = [str(c) for c in a.choices] if a.choices else []
                    values = ([samples[flag]] if flag in samples else []) + values + generic
                    count = 2 if a.nargs in ("+", "*") else (a.nargs if isinstance(a.nargs, int)
                                                             else 1)
                    cands = [[v] * count for v in values]
                tries = []
                for cand in cands:
                    if flag not in extra:
                        tries.append(base + extra + [flag] + cand)
                    tries.append(base + [flag] + cand)
            chosen = next((t for t in tries if parses(root, t)), None)
            # The same line without the flag and its values, when xpk takes that too (not for
            # a required flag, nor for one of a group the command needs one of).
            without = None
            if chosen is not None and not a.required:
                at = chosen.index(flag)
                rest = chosen[at + 1:]
                n = next((i for i, w in enumerate(rest) if w.startswith("-")), len(rest))
                n = 0 if a.nargs == 0 else n
                candidate = chosen[:at] + rest[n:]
                without = candidate if parses(root, candidate) else None
            print(json.dumps({"command": f"{group} {name}", "flag": flag, "argv": chosen,
                              "without": without}))

    if args.docs:
        for dirpath, _, files in os.walk(args.docs):
            for f in sorted(files):
                if not f.endswith(".md"):
                    continue
                path = os.path.join(dirpath, f)
                text = open(path, encoding="utf-8").read().replace("\\\n", " ")
                for line in text.splitlines():
                    line = line.strip().strip("`").strip()
                    m = re.match(r"^(?:python3?\s+xpk\.py|xpk)\s+(cluster|workload)\s+(.*)$", line)
                    if not m:
                        continue
                    try:
                        words = shlex.split(m.group(1) + " " + m.group(2))
                    except ValueError:
                        continue
                    if any(w.startswith("$") or "${" in w for w in words):
                        continue
                    if parses(root, words):
                        print(json.dumps({"command": " ".join(words[:2]), "flag": "",
                                          "doc": path, "argv": words}))


if __name__ == "__main__":
    main()
