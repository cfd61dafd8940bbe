"""Fresh processes: histories whose first call must be the process's first (``state.first-call``).

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

from conformance._src.calling.supervise import describe_exit, kill_tree

CHECK = "state.first-call"


@dataclass(frozen=True)
class Answer:
    """What one fresh process said: its failure block (None: every call right), or how it ended
    without a verdict (``ended``, with the last lines of its error output)."""

    failure: str | None = None
    ended: str | None = None
    kit_error: str | None = None


def start(kit: Any, tokens: list[str], started: dict[str, subprocess.Popen[str]]) -> None:
    """Start a fresh process for each token not in ``started`` (kept there): a run starts its
    own early (``Kit.start_fresh_processes``), so that they overlap the other checks."""
    request = {
        "spec": kit.spec,
        "contract": kit.contract_spec or kit.contract.name,
        "devices": kit.devices,
        "call_timeout": kit.call_timeout,
    }
    for token in tokens:
        if token not in started:
            started[token] = subprocess.Popen(
                [sys.executable, "-m", __name__, json.dumps({**request, "token": token})],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )


def judge(kit: Any, tokens: list[str], started: dict[str, subprocess.Popen[str]]) -> list[Answer]:
    """Replay each history token in a fresh process of its own, all side by side (those in
    ``started`` were started earlier); each one's answer."""
    start(kit, tokens, started)
    answers = []
    limit = 8 * kit.call_timeout + 120  # start-up, then a few calls of up to a timeout each
    for token in tokens:
        process = started.pop(token)
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


def main(argv: list[str]) -> int:
    """The fresh process: make the devices, load the implementation, judge one history."""
    request = json.loads(argv[0])
    try:
        print(json.dumps({"failure": _judged(request)}), flush=True)
    except Exception as error:  # noqa: BLE001 -- the kit's own failure, said as such
        print(json.dumps({"kit_error": f"{type(error).__name__}: {error}"}), flush=True)
    return 0


def _judged(request: dict[str, Any]) -> str | None:
    from conformance._src.calling import devices

    devices.ensure_host_devices(int(request["devices"]))
    from conformance._src.calling import loader
    from conformance._src.calling.calls import ImplementationHung, Runner
    from conformance._src.contract import checks  # noqa: F401 -- registers every check
    from conformance._src.contract.catalogue import CHECKS, CheckFailure
    from conformance._src.declared.contract import load
    from conformance._src.declared.terms import NAMES, named
    from conformance._src.running.kit import Kit
    from conformance._src.verdict import CheckVerdict

    impl = loader.load_impl(request["spec"])
    spec = request["contract"]
    contract = named(spec) if spec in NAMES else load(spec)
    timeout = float(request["call_timeout"])
    kit = Kit(
        impl=impl,
        spec=request["spec"],
        contract=contract,
        contract_spec=spec,
        devices=int(request["devices"]),
        runner=Runner(timeout=timeout),
        fresh=True,
    )
    kit.check_id = kit.running = CHECK
    kit.records[CHECK] = CheckVerdict(CHECK)
    try:
        CHECKS[CHECK].body(kit, request["token"])
    except (CheckFailure, ImplementationHung) as failed:
        return str(failed)
    except Exception as error:  # noqa: BLE001 -- the implementation broke the kit's code: a failure (Kit.run_check)
        return f"{type(error).__name__}: {error}"
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
