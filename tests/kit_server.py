"""A warm kit process: ``pytest conformance ...`` run in-process, one request after another.

A fresh Python that imports JAX, Hypothesis and pytest and makes 8 CPU devices takes 3-4 s on
this machine, more than most mutants take to be judged by their primary checks.  The kit's own
tests therefore judge mutants and alternates (where supervision is not the point: ``-n 0``)
in one server per pytest-xdist worker (``KitServer``, the ``kit_server`` fixture of
tests/conftest.py), each run a whole ``pytest.main`` of the suite as a user's command line
gives it, with its own report, exit status and output.

Isolation: every run loads ``--impl`` afresh (loader.py executes the module again), so an
implementation's caches start empty.  Hypothesis's profiles are put back as a fresh process has
them and ``default`` is loaded, whatever plug-in re-registered them in the run before (a run that
names no profile gets ``default``, as in a new process).  A run that leaves JAX's global state
changed (a config option, a mesh context: ``calls.global_state``) ends the server after its
reply, and the next run gets a fresh one; so does a run that hung.  Implementations that change
global state on purpose (the ``global_*`` mutants) or hang are run in processes of their own by
the tests anyway.

Protocol: one JSON line per request on stdin, ``{"args": [...], "output": PATH}``; the run's
stdout and stderr go to PATH; the reply is one JSON line on stdout, ``{"returncode": N,
"restart": bool}``.  Run as ``python -m tests.kit_server`` from the repository root.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
DEVICES = 8
PROFILES = ("default", "ci", "thorough")


def serve(requests: IO[str], replies: IO[str]) -> None:
    import pytest

    from conformance._src.calling.calls import global_state
    from conformance._src.calling.devices import ensure_host_devices

    ensure_host_devices(DEVICES)
    from hypothesis import settings

    import conformance.plugin  # noqa: F401 -- warm: the plug-in and what its hooks import
    from conformance._src.contract import checks  # noqa: F401
    from conformance._src.session.setup import register_profiles

    register_profiles()
    # What a fresh process has: a run's plug-ins (tests/hypothesis_fast_fail.py) may re-register
    # the profiles, and --hypothesis-profile loads one; each run starts from these again.
    profiles = {name: settings.get_profile(name) for name in PROFILES}
    before = global_state()
    for line in requests:
        request = json.loads(line)
        with open(request["output"], "w") as sink:
            sys.stdout.flush()
            sys.stderr.flush()
            saved = os.dup(1), os.dup(2)
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            try:
                returncode = int(pytest.main(list(request["args"])))
            except SystemExit as stop:  # os._exit is not caught: the client sees the server end
                returncode = stop.code if isinstance(stop.code, int) else 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
        for name, profile in profiles.items():
            settings.register_profile(name, profile)
        settings.load_profile("default")
        restart = global_state() != before
        replies.write(json.dumps({"returncode": returncode, "restart": restart}) + "\n")
        replies.flush()
        if restart:
            break


class KitServer:
    """The client: starts the server on first use, and again after it ended or was killed."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.started = 0  # servers started: 1 when every run shared one

    def _ensure(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.kit_server"],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self.started += 1
        return self.proc

    def run(self, args: list[str], timeout: float) -> tuple[int, str]:
        """``pytest args`` in the server: (exit status, output); -1 when it took over ``timeout`` s,
        -2 when the server ended without a reply."""
        proc = self._ensure()
        assert proc.stdin is not None and proc.stdout is not None
        with tempfile.TemporaryDirectory(prefix="kit-server-") as tmp:
            output = Path(tmp) / "output.txt"
            proc.stdin.write(json.dumps({"args": args, "output": str(output)}) + "\n")
            proc.stdin.flush()
            deadline = time.monotonic() + timeout
            ready: list[object] = []
            while not ready and time.monotonic() < deadline:
                ready, _, _ = select.select([proc.stdout], [], [], min(1.0, deadline - time.monotonic()))
            reply = proc.stdout.readline() if ready else ""
            text = output.read_text() if output.exists() else ""
        if not ready:
            self.close()
            return -1, text + f"\n[the run took more than {timeout:g} s in the kit server]"
        if not reply:
            self.close()
            return -2, text + f"\n[the kit server ended without a reply: exit {proc.wait()}]"
        answer = json.loads(reply)
        if answer["restart"]:
            proc.wait(timeout=60)
            self.proc = None
        return int(answer["returncode"]), text

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


if __name__ == "__main__":
    replies = os.fdopen(os.dup(1), "w")  # the reply channel; fd 1 itself goes to each run's output
    serve(sys.stdin, replies)
    replies.close()
    os._exit(0)  # leave threads a run may have left behind (a hung call's) where they are
