"""Run the conformance suite as N local processes of one multi-controller JAX job.

    python -m conformance.launch --processes 2 --devices-per-process 4 -- conformance --impl mypkg:f

Starts the processes on loopback (CPU devices, gloo collectives), streams
process 0's output, prints the others' when they fail, and exits with one
combined status: 0 when every process passed, 4 when any reported a usage
error, 1 otherwise.  Once a process has ended badly the others get
``--grace`` seconds to finish; then every process still running is killed,
so no orphan is left behind.  On a real cluster, run
``pytest --pyargs conformance --distributed ...`` under the cluster's own
launcher instead (see README).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time


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


def combined_status(statuses: list[int | None]) -> int:
    """The job's exit status: the processes' own where they agree (0 conforming, 1 not, 2 partial,
    3 kit error, 4 usage error); else 4 if any was a usage error, else 1."""
    first = statuses[0] if statuses else None
    if first is not None and 0 <= first <= 4 and all(s == first for s in statuses):
        return first
    if any(s == 4 for s in statuses):
        return 4
    return 1


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
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
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
    try:
        while any(p.poll() is None for p in procs):
            bad = [p for p in procs if p.poll() not in (None, 0)]
            if bad and deadline is None:
                deadline = time.monotonic() + args.grace
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        kill_all()
        for proc in procs:
            proc.wait()
        for pump in pumps:
            pump.join(timeout=5)
    statuses = [p.returncode for p in procs]
    for rank, (status, lines) in enumerate(zip(statuses, outputs, strict=True)):
        if rank and status != 0:
            sys.stdout.write(f"\n===== process {rank} (exit status {status}) =====\n")
            sys.stdout.write("".join(lines[-400:]))
    summary = ", ".join(f"process {r}: {s}" for r, s in enumerate(statuses))
    status = combined_status(statuses)
    print(f"\nconformance.launch: {summary} -> exit status {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
