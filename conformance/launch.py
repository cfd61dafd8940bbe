"""Run the conformance suite as N local processes of one multi-controller JAX job.

    python -m conformance.launch --processes 2 --devices-per-process 4 -- conformance --impl mypkg:f

Starts the processes on loopback (CPU devices, gloo collectives), streams
process 0's output, prints the others' when they fail, and exits with one
combined status: 0 when every process passed, 4 when any reported a usage
error, 3 when one ended with a kit error before any other ended badly (what
its peers did after it -- a failure, an abort by JAX's coordination service
once it left -- is no claim about the implementation), 1 when any failed or
died, 2 when any was partial.  Once a process has ended badly the others get
``--grace`` seconds to finish; then every process still running is killed,
so no orphan is left behind.  A process that dies (a signal, an exit in the
implementation or in the kit's own agreement step) or hangs in a call with
the GIL held is a check's verdict, as one supervised process's is: the
launcher ends the others, names the check that was running, and prints the
table and writes the ``--conformance-report`` files itself.  On a real cluster, run
``pytest --pyargs conformance --distributed ...`` under the cluster's own
launcher instead (see README).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pump(stream: object, sink: list[str], echo: bool) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        sink.append(line)
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()


DIED_GRACE_S = 3.0  # after one process died, for the others to end of themselves (they often do)
HUNG_MARGIN_S = 30.0  # past a call's deadline (the process's own timeout acts first, GIL allowing)


def _rerun(args: argparse.Namespace) -> Any:
    """A one-process rerun command, as this launcher's."""

    def launcher_rerun(command: str) -> str:
        words = shlex.split(command)
        if words[:3] != ["python", "-m", "pytest"]:
            return command
        rest, skip = [], False
        for word in words[3:]:
            if skip:
                skip = False
            elif word == "--devices":
                skip = True  # the launcher gives each process its devices
            else:
                rest.append(word)
        head = ["python", "-m", "conformance.launch", "--processes", str(args.processes)]
        head += ["--devices-per-process", str(args.devices_per_process), "--"]
        return shlex.join(head + rest)

    return launcher_rerun


def _hung(folder: Path, rank: int, now: float) -> bool:
    """Is process ``rank`` in a call far past its deadline (its own timeout could not act)?"""
    try:
        entry = json.loads((folder / f"process-{rank}.json").read_text())
    except (OSError, ValueError):
        return False
    return "deadline" in entry and now > float(entry["deadline"]) + HUNG_MARGIN_S


def _verdict_of_ending(folder: Path, endings: list[Any], args: argparse.Namespace, took: float) -> int | None:
    """A process died: the check's verdict, the table and the report files; the job's exit status."""
    from conformance._src.session.verdicts import launcher_verdict, write_summary

    report, path = launcher_verdict(folder, endings, _rerun(args))
    if report is None:
        return None
    report.duration = took
    sys.stdout.write(
        "\n" + " pjit_double conformance (conformance.launch: a process ended early) ".center(80, "=") + "\n"
    )
    write_summary(report, path, print)
    return int(report.verdict.exit_status)


def _kit_error_of(folder: Path, kit: Any, endings: list[Any], took: float) -> None:
    """A process's kit error is the job's verdict (``kit_error_first``): its table and report files,
    unless process 0 gave a KIT ERROR's itself, and a line on how the others ended after it."""
    from conformance._src.session.verdicts import describe, state_report, write_summary
    from conformance._src.verdict import RunVerdict

    own, _ = state_report(folder, 0)
    if not (endings[0].done and own is not None and own.verdict is RunVerdict.KIT_ERROR):
        report, path = state_report(folder, kit.rank)
        if report is not None:
            report.duration = took
            heading = f" pjit_double conformance (conformance.launch: process {kit.rank}'s kit error) "
            sys.stdout.write("\n" + heading.center(80, "=") + "\n")
            write_summary(report, path, print)
    after = [f"process {e.rank}: {describe(e)}" for e in endings if e.returncode not in (0, 2, 3)]
    if after:
        print(
            f"\nconformance.launch: process {kit.rank} ended with a kit error (exit 3) before any other "
            f"ended badly; after it, {'; '.join(after)}: what follows a process leaving the job, "
            "which says nothing about the implementation"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.launch", description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--devices-per-process", type=int, default=4)
    parser.add_argument(
        "--grace",
        type=float,
        default=90.0,
        help="seconds the other processes get once one has failed or died (default 90)",
    )
    parser.add_argument("pytest_args", nargs="*", help="arguments for pytest, after --")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.devices_per_process < 1:
        parser.error("--processes and --devices-per-process must be at least 1")
    port = _free_port()
    procs: list[subprocess.Popen[str]] = []
    outputs: list[list[str]] = []
    pumps = []
    folder = Path(tempfile.mkdtemp(prefix="conformance-launch-"))
    from conformance._src.calling.distributed import STATE_ENV, Ending, combined_status, kit_error_first

    env = {**os.environ, "PYTHONUNBUFFERED": "1", STATE_ENV: str(folder)}
    started = time.monotonic()
    for rank in range(args.processes):
        command = [
            sys.executable,
            "-m",
            "pytest",
            *args.pytest_args,
            "--distributed",
            "--coordinator",
            f"127.0.0.1:{port}",
            "--num-processes",
            str(args.processes),
            "--process-id",
            str(rank),
            "--devices",
            str(args.devices_per_process),
        ]
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )  # its own group: killed as a whole
        procs.append(proc)
        outputs.append([])
        pump = threading.Thread(target=_pump, args=(proc.stdout, outputs[-1], rank == 0), daemon=True)
        pump.start()
        pumps.append(pump)

    def kill_all(*_: object) -> None:
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def on_term(*_: object) -> None:
        kill_all()
        sys.exit(1)

    signal.signal(signal.SIGTERM, on_term)
    deadline: float | None = None
    hung: set[int] = set()
    killed: set[int] = set()
    died_at: float | None = None

    def done(rank: int) -> bool:
        return (folder / f"process-{rank}.done").exists()

    ended: dict[int, float] = {}  # when each process was seen to end (time.time(): a mark's clock)

    def seen() -> None:
        for rank, proc in enumerate(procs):
            if rank not in ended and proc.poll() is not None:
                ended[rank] = time.time()

    try:
        while any(p.poll() is None for p in procs):
            seen()
            now = time.monotonic()
            for rank, proc in enumerate(procs):
                if proc.poll() is None and _hung(folder, rank, time.time()):
                    hung.add(rank)
                    os.killpg(proc.pid, signal.SIGKILL)
            if died_at is None and any(p.poll() is not None and not done(r) for r, p in enumerate(procs)):
                died_at = now  # the job cannot go on without it: the others end soon
            if died_at is not None and now > died_at + DIED_GRACE_S:
                killed.update(r for r, p in enumerate(procs) if p.poll() is None)
                break
            bad = [p for p in procs if p.poll() not in (None, 0)]
            if bad and deadline is None:
                deadline = now + args.grace
            if deadline is not None and now > deadline:
                killed.update(r for r, p in enumerate(procs) if p.poll() is None)
                break
            time.sleep(0.2)
    finally:
        seen()
        kill_all()
        for proc in procs:
            proc.wait()
        seen()
        for pump in pumps:
            pump.join(timeout=5)
    statuses = [p.returncode for p in procs]
    for rank, (status, lines) in enumerate(zip(statuses, outputs, strict=True)):
        if rank and status != 0:
            sys.stdout.write(f"\n===== process {rank} (exit status {status}) =====\n")
            sys.stdout.write("".join(lines[-400:]))
    summary = ", ".join(f"process {r}: {s}" for r, s in enumerate(statuses))

    def done_at(rank: int) -> float | None:
        try:
            return (folder / f"process-{rank}.done").stat().st_mtime
        except OSError:
            return None

    endings = [
        Ending(r, s, done(r), r in hung, r in killed and r not in hung, at=ended[r], done_at=done_at(r))
        for r, s in enumerate(statuses)
    ]
    status = combined_status(endings)
    kit = kit_error_first(endings)
    if kit is not None and status == 3:  # what the others did after it is not the implementation's
        _kit_error_of(folder, kit, endings, time.monotonic() - started)
    elif any(not e.done for e in endings):
        judged = _verdict_of_ending(folder, endings, args, time.monotonic() - started)
        status = judged if judged is not None else status
    shutil.rmtree(folder, ignore_errors=True)
    print(f"\nconformance.launch: {summary} -> exit status {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
