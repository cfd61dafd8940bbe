"""An accelerator run: ``JAX_PLATFORMS`` names an accelerator, and one command judges both sides.

    JAX_PLATFORMS=tpu python -m pytest --pyargs conformance --impl mypkg:pjit_double

The run's own processes (the controller, its worker, their fresh processes) get
``JAX_PLATFORMS=cpu`` and judge the whole contract on ``--devices`` forced CPU devices, as a
plain run does.  Beside them, one more process -- the *chips' part* -- holds the chips (one
process may): ``JAX_PLATFORMS=<accelerator>,cpu``, ``--devices`` the chips there are, ``-n 0``.
It runs every check on what the chips can make (one device per chip, their memory kinds, every
mesh over them) and ``platform.agrees``, which compares the chips' results with the CPU's for the
same inputs (forced CPU devices in that same process).  The forced-CPU part's ``platform.chips``
waits for it and gives its verdict; the report says where each check ran.

The chips' part is started when the run starts (``start``), after a probe that the accelerator's
backend starts at all (a usage error, as before, where it does not), so that it runs while the
forced-CPU part does.  Its folder (``folder()``) is how the run's processes find it: the
environment carries it to the pytest-xdist worker, and to a worker restarted after a crash.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FOLDER_ENV = "CONFORMANCE_CHIP_PART"  # the chips' part's folder, in an accelerator run's processes
ACCELERATOR_ENV = "CONFORMANCE_ACCELERATOR"  # the platform JAX_PLATFORMS named there
DEFAULT_CPU = 8


def accelerator(platforms: str | None = None) -> str | None:
    """The accelerator ``JAX_PLATFORMS`` names first (``tpu`` for ``tpu`` or ``tpu,cpu``), or None
    where it names none (unset, ``cpu``)."""
    text = os.environ.get("JAX_PLATFORMS", "") if platforms is None else platforms
    names = [p.strip() for p in text.split(",") if p.strip()]
    return next((p for p in names if p != "cpu"), None)


def folder() -> Path | None:
    """The chips' part's folder, in an accelerator run's forced-CPU processes; else None."""
    path = os.environ.get(FOLDER_ENV)
    return Path(path) if path else None


def platform_name() -> str:
    return os.environ.get(ACCELERATOR_ENV, "the accelerator")


def probe(platform: str) -> dict[str, Any]:
    """Start the accelerator's backend in a child and say what it has: ``{"count", "kind"}``, or
    ``{"error": line}`` (devices.py's words) where it does not start."""
    env = {**os.environ, "JAX_PLATFORMS": platform}
    env.pop(FOLDER_ENV, None)
    done = subprocess.run(
        [sys.executable, "-m", "conformance._src.calling.chips", "probe"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return {"error": f"JAX's backend could not start for JAX_PLATFORMS={platform}: {tail}"}
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def start(platform: str, chips: int, args: list[str], cwd: str) -> Path:
    """Start the chips' part: ``pytest`` with ``args`` (the run's own options) in a process that
    holds the chips and as many forced CPU devices (``DEFAULT_CPU`` at least), for a CPU mesh like
    each of theirs.  Returns its folder, where it writes ``report.json``, ``output.txt`` and, when
    it ended, ``done.json``; the folder goes when the run ends."""
    where = Path(tempfile.mkdtemp(prefix="conformance-chips-"))
    env = {**os.environ, "JAX_PLATFORMS": f"{platform},cpu"}
    env.pop(FOLDER_ENV, None)
    command = [
        sys.executable,
        "-m",
        "conformance._src.calling.chips",
        "part",
        str(where),
        "--",
        "-m",
        "pytest",
        "--pyargs",
        "conformance",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "-q",
        "--devices",
        str(chips),
        "--chip-part",
        str(max(DEFAULT_CPU, chips)),
        "--conformance-report",
        str(where / "report.json"),
        *args,
    ]
    process = subprocess.Popen(command, env=env, cwd=cwd, start_new_session=True)
    (where / "pid").write_text(str(process.pid))
    atexit.register(_stop, process, where)
    return where


def _stop(process: subprocess.Popen[bytes], where: Path) -> None:
    """At the run's end: a chips' part still running (the run was interrupted) goes too, and so
    does its folder."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        process.wait()
    shutil.rmtree(where, ignore_errors=True)


@dataclass
class Part:
    """What the chips' part concluded: its checks' statuses and messages, where it ran."""

    platform: str
    returncode: int | None  # None: it ran past its deadline, and was ended
    output: str  # the end of its output
    checks: list[dict[str, Any]] = field(default_factory=list)  # its report's "checks"
    environment: dict[str, Any] = field(default_factory=dict)
    verdict: str | None = None  # its run's verdict; None: it wrote no report

    @property
    def devices(self) -> str:
        count = self.environment.get("device_count", "?")
        kind = self.environment.get("device_kind") or self.platform
        return f"{count} {kind} chip(s) ({self.platform})"


def wait(where: Path, *, deadline: float, poll: float = 0.5) -> Part:
    """The chips' part's outcome, once it ended (its runner writes ``done.json`` last); one still
    running after ``deadline`` seconds is ended, and its ``returncode`` is None."""
    done = where / "done.json"
    pid = int((where / "pid").read_text()) if (where / "pid").exists() else None
    end = time.monotonic() + deadline
    while not done.exists():
        if pid is not None and not _alive(pid):
            time.sleep(1.0)  # it may have written done.json as it ended
            if not done.exists():
                return Part(platform_name(), -1, _tail(where), verdict=None)
        if time.monotonic() > end:
            if pid is not None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            return Part(platform_name(), None, _tail(where), verdict=None)
        time.sleep(poll)
    ended = json.loads(done.read_text())
    part = Part(platform_name(), int(ended["returncode"]), _tail(where))
    report = where / "report.json"
    if report.exists():
        data = json.loads(report.read_text())
        part.checks = list(data.get("checks", []))
        part.environment = dict(data.get("environment", {}))
        part.verdict = data.get("verdict", {}).get("status")
    return part


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: an ended child its parent has not reaped yet (a zombie) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _tail(where: Path, lines: int = 40) -> str:
    path = where / "output.txt"
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _main(argv: list[str]) -> int:
    """``probe``: the accelerator's device count and kind, as one JSON line.  ``part FOLDER --
    ARGS``: run ``python ARGS`` (the chips' part's pytest), its output to FOLDER/output.txt, then
    write FOLDER/done.json with its exit status."""
    if argv[:1] == ["probe"]:
        from conformance._src.calling import devices

        try:
            import jax

            found = jax.devices()
        except Exception as exc:  # noqa: BLE001 -- any failure to start: devices.py's words
            print(json.dumps({"error": devices.backend_failure(exc)}))
            return 0
        print(json.dumps({"count": len(found), "kind": found[0].device_kind, "platform": found[0].platform}))
        return 0
    where, args = Path(argv[1]), argv[3:]
    with open(where / "output.txt", "wb") as out:
        code = subprocess.run(
            [sys.executable, *args], stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode
    (where / "done.json.tmp").write_text(json.dumps({"returncode": code}))
    os.replace(where / "done.json.tmp", where / "done.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
