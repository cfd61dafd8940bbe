"""Fresh processes: histories whose first call must be the process's first (``state.first-call``,
and a declared contract's ``fn.histories``).

An implementation may build something once, lazily, on its first call -- a default mesh from
"the device JAX puts new arrays on", a cache keyed on the context's mesh -- and every later call
then lives with what that first call saw.  A run's worker has called the implementation long
before any check could choose the context of its first call, so such a history runs in a process
of its own: ``judge`` starts one per history (side by side), each loads ``--impl`` afresh, makes
the devices, replays its history (``history.replay``; the first call under its context) with the
same judge as ``state.histories``, and answers with its verdict on the last line of its output:
the failure block, or none.  A process that ends without an answer is a crash of that history.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import jax

from conformance._src.calling.supervise import describe_exit, kill_tree

CHECK = "state.first-call"
DECLARED_CHECK = "fn.histories"  # a declared contract's first calls under a context (declared/history.py)
MAIN = "conformance._src.running.fresh_main"  # what a fresh process runs


@dataclass(frozen=True)
class Answer:
    """What one fresh process said: its failure block (None: every call right), or how it ended
    without a verdict (``ended``, with the last lines of its error output)."""

    failure: str | None = None
    ended: str | None = None
    kit_error: str | None = None


def start(kit: Any, jobs: list[dict[str, Any]], started: dict[str, subprocess.Popen[str]]) -> None:
    """Start a fresh process for each job not in ``started`` (kept there, by the job as JSON): a
    history token to replay (and the run's seed), or a seed and an index into
    ``history.first_calls``.  A run starts them early (``Kit.start_fresh``), so that they overlap
    the other checks."""
    request = {
        "spec": kit.spec,
        "contract": kit.contract_spec or kit.contract.name,
        "devices": len(jax.local_devices()),  # across processes, the fresh one is a single process
        "call_timeout": kit.call_timeout,
    }
    for job in jobs:
        key = json.dumps(job, sort_keys=True)
        if key not in started:
            started[key] = subprocess.Popen(
                [sys.executable, "-m", MAIN, json.dumps({**request, **job})],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )


def judge(kit: Any, jobs: list[dict[str, Any]], started: dict[str, subprocess.Popen[str]]) -> list[Answer]:
    """Run each job in a fresh process of its own, all side by side (those in ``started`` were
    started earlier); each one's answer."""
    start(kit, jobs, started)
    answers = []
    limit = 8 * kit.call_timeout + 120  # start-up, then a few calls of up to a timeout each
    for job in jobs:
        process = started.pop(json.dumps(job, sort_keys=True))
        try:
            out, err = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            kill_tree(process.pid)
            out, err = process.communicate()
            answers.append(Answer(ended=f"it did not finish within {limit:g} s"))
            continue
        answers.append(_answer(out, err, process.returncode))
    return answers


def stop(started: dict[str, subprocess.Popen[str]]) -> None:
    """End the fresh processes no check collected (the run ended before state.first-call)."""
    for process in started.values():
        if process.poll() is None:
            kill_tree(process.pid)
    started.clear()


def _answer(out: str, err: str, returncode: int) -> Answer:
    last = (out.strip().splitlines() or [""])[-1]
    try:
        said = json.loads(last)
    except ValueError:
        said = None
    if isinstance(said, dict) and "failure" in said:
        return Answer(failure=said["failure"])
    if isinstance(said, dict) and "kit_error" in said:
        return Answer(kit_error=str(said["kit_error"]))
    tail = " | ".join(err.strip().splitlines()[-3:]) or "no error output"
    return Answer(ended=f"{describe_exit(returncode)}; last lines: {tail[:400]}")
