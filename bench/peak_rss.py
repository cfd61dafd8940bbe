"""Peak memory of a conformance run: the kit must stay bounded whatever a result's size.

    python bench/peak_rss.py [--impl SPEC ...] [--kill-above-gb 8] [-- extra pytest args]

Runs ``python -m pytest conformance --impl SPEC`` (a default run: one
supervised worker) in a fresh process for each SPEC (default: the hostile
``tests/hostile/huge_result.py``, whose every result is 10**8 elements,
``tests/hostile/huge_from_five.py``, 400 MB results from 5 elements on, and
the reference) and prints, per run,
the exit status, the wall time and the peak RSS of the process tree: the
largest resident set of any of its processes (``getrusage(RUSAGE_CHILDREN)``,
measured in a grandchild per run so that runs do not share a maximum) and the
largest sum over the tree seen by polling ``/proc`` every 50 ms.  A run whose
tree passes ``--kill-above-gb`` is killed, so that a kit that keeps every
result cannot take the machine down with it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_IMPLS = (
    "tests/hostile/huge_result.py:pjit_double",
    "tests/hostile/huge_from_five.py:pjit_double",
    "reference:pjit_double",
)
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


def _measure(argv: list[str], kill_above: int) -> dict[str, object]:
    """In a child of this script: run ``argv``, poll its tree, report as JSON."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
    chunks: list[bytes] = []
    polled, killed = 0, False
    while proc.poll() is None:
        now = _rss(_tree(proc.pid))
        polled = max(polled, now)
        if now > kill_above and not killed:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
        chunk = proc.stdout.read()  # type: ignore[union-attr]
        if chunk:
            chunks.append(chunk)
        time.sleep(0.05)
    rest = proc.stdout.read()  # type: ignore[union-attr]
    if rest:
        chunks.append(rest)
    wall = time.perf_counter() - start
    maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    tail = b"".join(chunks).decode(errors="replace").splitlines()[-25:]
    return {
        "rc": proc.returncode,
        "wall_s": wall,
        "maxrss": maxrss,
        "polled": polled,
        "killed": killed,
        "tail": tail,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--impl", action="append", help="implementation spec (repeatable)")
    parser.add_argument("--kill-above-gb", type=float, default=8.0)
    parser.add_argument("--tail", action="store_true", help="print the last lines of each run's output")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one run, in a child
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    if args.measure:
        result = _measure(json.loads(args.measure), int(args.kill_above_gb * 2**30))
        print(json.dumps(result))
        return 0
    status = 0
    for spec in args.impl or DEFAULT_IMPLS:
        argv = [sys.executable, "-m", "pytest", "conformance", "-p", "no:cacheprovider", "-q", "--impl", spec]
        argv += args.pytest_args
        # A child per run, so that RUSAGE_CHILDREN is this run's maximum alone.
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--kill-above-gb",
                str(args.kill_above_gb),
                "--measure",
                json.dumps(argv),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout)
        verdict = "KILLED (over the limit)" if r["killed"] else f"exit {r['rc']}"
        print(
            f"{spec}: {verdict}, wall {r['wall_s']:.1f} s, peak RSS {r['maxrss'] / 2**20:.0f} MiB "
            f"(largest process), {r['polled'] / 2**20:.0f} MiB (tree, polled)"
        )
        if args.tail:
            print("\n".join("    " + line for line in r["tail"]))
        status |= bool(r["killed"])
    return status


if __name__ == "__main__":
    sys.exit(main())
