"""Supervision: the implementation runs in a process that another one watches.

A conformance run is worth its verdict only if every way the implementation
can end its process still gives one.  So, unless told otherwise, the kit's
checks run in a pytest-xdist worker and the process the user started (the
controller) only watches, collects verdicts and reports.  pytest-xdist
already notices a worker that dies, reports the test it was running as
failed and starts a fresh worker for the remaining tests; this module adds
what a conformance verdict needs on top of that:

* **The probe** (``Probe``): the controller never imports the
  implementation.  A short-lived child process makes the devices and loads
  ``--impl`` first, so that a bad spec, a backend that cannot start or an
  import that ends the process is one usage error before any worker starts.
* **The call log** (``CallLog``, worker side): before each call of the
  implementation the worker writes what it is about to call (check, input,
  rerun command, deadline) to a small file the controller can read; after
  the call it marks the call done.
* **The watchdog** (``Supervisor``, controller side): a thread that kills a
  worker whose call is past its deadline -- with or without the GIL held --
  together with any process the call started.
* **Crash verdicts**: when a worker dies, the check it was running gets a
  ``crashed`` verdict (or ``failed`` for a hang) that names the signal or
  exit status, the input and the rerun command.  A gate check that crashed is
  remembered in the state folder, so fresh workers skip what stands behind it
  instead of crashing once per check.

``-n 0`` (or ``-p no:xdist``, ``--pdb``) runs everything in one process
without supervision, for debugging; ``--distributed`` runs are supervised by
``conformance.launch``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conformance._src import internals
from conformance._src.verdict import CheckVerdict, Status

STATE_DIR_KEY = "conformance_state_dir"
GRACE_S = 0.5  # past a call's deadline before the watchdog acts
POLL_S = 0.1
PROGRESS_S = 5.0  # the least time between two progress lines of a worker


# -- the probe ----------------------------------------------------------------------
@dataclass(frozen=True)
class ProbeResult:
    """What the probe process learned about the implementation and the devices."""

    impl_version: str | None
    devices: int
    backend: str
    device_kind: str


@dataclass
class Probe:
    """The probe's child process, started early so that it overlaps the controller's own start-up."""

    spec: str
    process: subprocess.Popen[str]
    origin: str = "--impl"  # where the spec came from (loader.spec_origin)
    devices: int = 1

    @classmethod
    def start(
        cls, spec: str, devices: int, origin: str = "--impl", *extra: str, entry: str = __name__
    ) -> Probe:
        """``entry``: the module whose ``__main__`` runs the child (``_probe_main``; a contract's own
        entry checks more of the implementation), given ``extra`` after the usual arguments."""
        argv = [sys.executable, "-m", entry, "probe", spec, str(devices), origin, *extra]
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        return cls(spec, process, origin, devices)

    def result(self, timeout: float) -> ProbeResult:
        """What the probe learned; ``pytest.UsageError`` (one line) if loading failed."""
        from conformance._src.calling.loader import spec_label

        spec = spec_label(self.spec, self.origin)
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.process.pid)
            out, _ = self.process.communicate()
            if _LOADING not in out:  # still making the devices: the implementation was not even loaded
                raise pytest.UsageError(
                    f"conformance: --devices {self.devices}: making {self.devices} devices did not finish "
                    f"within {timeout:g} s (device set-up, before the implementation was loaded); "
                    f"ask for fewer devices"
                ) from None
            raise pytest.UsageError(
                f"{spec}: loading it did not finish within {timeout:g} s (an import that waits forever?)"
            ) from None
        last = out.strip().splitlines()[-1:] or [""]
        try:
            answer = json.loads(last[0])
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            tail = err.strip().splitlines()[-1:] or ["no output"]
            raise pytest.UsageError(
                f"{spec}: loading it ended the process ({describe_exit(self.process.returncode)}) "
                f"before the kit could check anything; last line: {tail[0][:200]}"
            )
        if "usage_error" in answer:
            raise pytest.UsageError(str(answer["usage_error"]))
        return ProbeResult(
            impl_version=answer.get("impl_version"),
            devices=int(answer["devices"]),
            backend=str(answer["backend"]),
            device_kind=str(answer["device_kind"]),
        )

    def cancel(self) -> None:
        if self.process.poll() is None:
            kill_tree(self.process.pid)
        self.process.communicate()


_LOADING = "conformance-probe: devices made, loading the implementation"


def _probe_main(spec: str, count: int, origin: str, check: Callable[[Any], None] | None = None) -> int:
    """The child's side of ``probe``: a line once the devices are made, then one JSON line on stdout.
    ``check(impl)`` raises ``loader.ImplSpecError`` where the implementation cannot be judged."""
    from conformance._src.calling import devices, loader

    try:
        found = devices.ensure_host_devices(count)
        print(_LOADING, flush=True)
        impl = loader.load_impl(spec, origin)
        if check is not None:
            check(impl)
    except (devices.DeviceSetupError, loader.ImplSpecError) as exc:
        answer: dict[str, Any] = {
            "usage_error": f"conformance: {exc}" if isinstance(exc, RuntimeError) else str(exc)
        }
    else:
        answer = {
            "impl_version": loader.module_version(impl),
            "devices": len(found),
            "backend": found[0].platform,
            "device_kind": found[0].device_kind,
        }
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    sys.stdout.flush()
    os._exit(0)  # the implementation's own exit handlers are not the probe's business


# -- the call log (worker side) -------------------------------------------------------
@dataclass
class CallLog:
    """The worker's note of the call it is making, for the controller to read."""

    path: Path
    _fault: Any = None  # faulthandler's file, open as long as the process lives
    _last: dict[str, str] = field(default_factory=dict)  # the last call's check, input and rerun
    _fd: int | None = None  # the log, open as long as the process lives
    _size: int = 0

    def _write(self, entry: dict[str, Any]) -> None:
        """Overwrite the log in place: two writes per call, so a file made and renamed per write
        (about 0.4 ms each here) cost seconds a run.  The text is padded with spaces to the
        file's length, so the file always holds one JSON document (a reader that meets a write
        half done reads a bad document and tries again at its next look: Supervisor._read)."""
        entry["pid"] = os.getpid()
        data = json.dumps(entry).encode()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.pwrite(self._fd, data.ljust(self._size), 0)
        self._size = max(self._size, len(data))

    def begin(self, check_id: str, input_text: str, rerun: str, timeout: float) -> None:
        now = time.time()
        self._last = {"check": check_id, "input": input_text, "rerun": rerun}
        self._write(
            {
                "check": check_id,
                "input": input_text,
                "rerun": rerun,
                "started": now,
                "deadline": now + timeout,
            }
        )

    def end(self, check_id: str) -> None:
        """The call returned: no call in flight; its input and rerun are kept as the last call's
        (a process that ends while the kit judges that result is rerun with it)."""
        last = self._last if self._last.get("check") == check_id else {}
        kept = {"last_input": last["input"], "last_rerun": last["rerun"]} if last else {}
        self._write({"check": check_id, **kept})

    def progress(self, what: str, done: int, total: int, unit: str) -> None:
        """How far a long step of the worker is (``done`` of ``total`` ``unit``), for the watcher to show."""
        tmp = self.path.with_suffix(".progress.tmp")
        tmp.write_text(json.dumps({"what": what, "done": done, "total": total, "unit": unit}))
        os.replace(tmp, self.path.with_suffix(".progress"))

    def catch_fatal_errors(self) -> None:
        """Python's own report of a fatal signal goes to a file beside the log, for the crash verdict."""
        self._fault = self.path.with_suffix(".fault").open("w")
        faulthandler.enable(file=self._fault, all_threads=False)


def where_it_crashed(fault_text: str) -> str | None:
    """The innermost frames of the crashed thread that are not the kit's, from faulthandler's report."""
    blocks = [b for b in fault_text.split("\n\n") if "most recent call first" in b]
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', blocks[0] if blocks else "")
    kit_dir = str(Path(__file__).resolve().parents[2])  # the whole conformance package, not calling/ alone
    mine = []
    for filename, line, function in frames:  # innermost first
        if filename.startswith(kit_dir) or "threading.py" in filename:
            break
        mine.append(f"{filename}, line {line}, in {function}")
    return " <- ".join(mine[:3]) if mine else None


def call_log_for(workerinput: dict[str, Any] | None) -> CallLog | None:
    """This worker's call log, when a supervisor watches it."""
    if not workerinput or STATE_DIR_KEY not in workerinput:
        return None
    return CallLog(Path(workerinput[STATE_DIR_KEY]) / f"{workerinput['workerid']}.json")


def crashed_gates(workerinput: dict[str, Any] | None) -> dict[str, str]:
    """Gate checks whose process died earlier in this run: gate ID -> the crash message."""
    if not workerinput or STATE_DIR_KEY not in workerinput:
        return {}
    path = Path(workerinput[STATE_DIR_KEY]) / "crashed-gates.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


# -- the controller ----------------------------------------------------------------
def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "exit status unknown"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by signal {-returncode} ({name})"
    return f"exit status {returncode}"


_HINTS = {
    "SIGSEGV": "a segmentation fault: see the README's note on JAX 0.10.2 and committed inputs split over "
    "other devices, or a C extension's bug",
    "SIGKILL": "SIGKILL usually comes from the kernel's out-of-memory killer: does the call allocate far "
    "more than its result?",
    "SIGABRT": "an abort: a failed check inside XLA or a C extension",
}


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc); empty elsewhere."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields_ = entry.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields_[1]), []).append(int(entry.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    for victim in [*_descendants(pid), pid]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)


def crash_verdict(
    check_id: str,
    entry: dict[str, Any],
    returncode: int | None,
    hung: bool,
    fault: str | None,
    timeout: float,
    *,
    process: str = "the process running the implementation",
    after: str = "the remaining checks ran in a fresh process",
) -> CheckVerdict:
    """The verdict of ``check_id``, whose process ended (``returncode``) or was ended as ``hung``.

    ``entry`` is the process's call log (``CallLog``), ``fault`` faulthandler's report of a fatal
    signal.  One-process supervision and ``conformance.launch`` both give a crashed check this one.
    """
    in_call = "deadline" in entry and entry.get("check") == check_id
    if hung and in_call:
        lines = [
            f"[{check_id}] the call did not return",
            f"  input:    {entry['input']}",
            f"  expected: a result within --call-timeout={timeout:g} s",
            f"  got:      still running after {timeout:g} s; the kit ended {process} ({after})",
            "  hint:     does it wait for something that never comes (a lock, a queue, a collective "
            "that other devices never join), or block in C code? raise --call-timeout if it is only slow",
            f"  rerun:    {entry['rerun']}",
        ]
        return CheckVerdict(check_id, status=Status.FAILED, message="\n".join(lines))
    how = describe_exit(returncode)
    where = (
        f"during a call of the implementation\n  input:    {entry['input']}"
        if in_call
        else "outside a call of the implementation (while the kit judged a result, or at exit)"
    )
    hint = next((h for name, h in _HINTS.items() if name in how), None)
    crashed_in = where_it_crashed(fault) if fault else None
    if crashed_in and in_call:
        where += f"\n  where:    {crashed_in}"
    if returncode is not None and returncode >= 0:
        hint = (
            "something called os._exit() or sys.exit() from a thread, or a library ended the "
            "process; an implementation must return or raise"
        )
    lines = [
        f"[{check_id}] {process} ended {where}",
        "  expected: the call returns or raises, and the process goes on",
        f"  got:      the process ended: {how} ({after})",
    ]
    if hint:
        lines.append(f"  hint:     {hint}")
    if in_call:
        lines.append(f"  rerun:    {entry['rerun']}")
    elif entry.get("check") == check_id and "last_rerun" in entry:  # ended after a call returned
        lines.insert(1, f"  after:    the call on {entry['last_input']} returned")
        lines.append(f"  rerun:    {entry['last_rerun']}")
    return CheckVerdict(check_id, status=Status.CRASHED, message="\n".join(lines))


@dataclass
class Supervisor:
    """The controller's side: the state folder, the watchdog, the crash verdicts."""

    timeout: float
    state_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="conformance-")))
    hung: dict[str, dict[str, Any]] = field(default_factory=dict)  # worker id -> its call log entry
    _nodes: dict[str, Any] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    # A piped run (a CI log) shows a worker's progress through long steps, a line at most every
    # PROGRESS_S: the shared pass can otherwise be silent for most of a run.
    show_progress: bool = False
    _shown: dict[str, tuple[float, str]] = field(default_factory=dict)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="conformance-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        for node in list(self._nodes.values()):  # nothing the run started outlives it
            pid = internals.worker_pid(node)
            if pid is not None and internals.worker_returncode(node, wait=0) is None:
                with contextlib.suppress(OSError):
                    for child in _descendants(pid):
                        os.kill(child, signal.SIGKILL)
        with contextlib.suppress(OSError):
            for path in self.state_dir.iterdir():
                path.unlink()
            self.state_dir.rmdir()

    def worker_ready(self, node: Any) -> None:
        self._nodes[node.gateway.id] = node

    def worker_down(self, node: Any) -> None:
        """A worker ended: never act on its (stale) call log again, its pid may be reused."""
        self._nodes.pop(node.gateway.id, None)

    def _read(self, worker_id: str) -> dict[str, Any]:
        try:
            return dict(json.loads((self.state_dir / f"{worker_id}.json").read_text()))
        except (OSError, ValueError):
            return {}

    def _progress(self, worker_id: str, now: float) -> None:
        try:
            seen = json.loads((self.state_dir / f"{worker_id}.progress").read_text())
            line = f"conformance: {seen['what']}: {seen['done']} of {seen['total']} {seen['unit']}"
        except (OSError, ValueError, KeyError, TypeError):
            return
        last_time, last_line = self._shown.get(worker_id, (0.0, ""))
        if line != last_line and now - last_time >= PROGRESS_S:
            self._shown[worker_id] = (now, line)
            sys.stdout.write(f"\n{line}\n")
            sys.stdout.flush()

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            now = time.time()
            for worker_id, node in list(self._nodes.items()):
                if self.show_progress:
                    self._progress(worker_id, now)
                entry = self._read(worker_id)
                if "deadline" not in entry or now <= entry["deadline"] + GRACE_S or worker_id in self.hung:
                    continue
                if internals.worker_pid(node) not in (None, entry["pid"]):
                    continue  # not this worker's process: never signal a stranger
                if internals.worker_returncode(node, wait=0) is None:
                    self.hung[worker_id] = entry
                    kill_tree(int(entry["pid"]))

    def crash_verdict(self, nodeid: str, node: Any) -> CheckVerdict:
        """The verdict of the check that was running when ``node``'s process ended."""
        check_id = nodeid.rpartition("[")[2].rstrip("]")
        worker_id = node.gateway.id
        entry = self.hung.get(worker_id) or self._read(worker_id)
        returncode = internals.worker_returncode(node, wait=5.0)
        fault = None
        with contextlib.suppress(OSError):
            fault = (self.state_dir / f"{worker_id}.fault").read_text()
        return crash_verdict(check_id, entry, returncode, worker_id in self.hung, fault, self.timeout)

    def remember_crashed_gate(self, verdict: CheckVerdict) -> None:
        path = self.state_dir / "crashed-gates.json"
        try:
            known = dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            known = {}
        known[verdict.id] = verdict.message
        path.write_text(json.dumps(known))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "probe":
        sys.exit(_probe_main(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    sys.exit("usage: python -m conformance._src.calling.supervise probe SPEC DEVICES ORIGIN")
