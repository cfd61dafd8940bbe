"""Every way a run ends is a verdict: hostile implementations through the real suite, in real processes.

Each hostile implementation (tests/hostile/) wraps the reference and turns
hostile on vectors longer than 40 elements, so the gate checks pass and the
checks after them meet the hostile call.  Each run is checked for its exit
status, its table and its JSON report, and for processes left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.kit_process import ROOT, child_env, run_kit, run_kit_report, statuses, verdict

# Two checks behind the gates: the second shows that a fresh process ran it.
SUBSET = ("--check", "call.smoke", "--check", "result.type", "--check", "values.float32")


def _left_behind(mark: str) -> list[int]:
    """Processes that still carry this run's marker in their environment."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"KIT_RUN_MARK={mark}".encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize(
    ("hostile", "timeout", "status", "says"),
    [
        ("segfault", "60", "crashed", "killed by signal 11 (SIGSEGV)"),
        ("exit_in_call", "60", "crashed", "exit status 0"),
        ("killed_for_memory", "60", "crashed", "killed by signal 9 (SIGKILL)"),
        ("gil_hang", "3", "failed", "still running after 3 s"),
        ("sys_exit", "60", "failed", "SystemExit: 0"),
    ],
)
def test_a_hostile_call_fails_its_check_and_the_next_runs_in_a_fresh_process(
    hostile: str, timeout: str, status: str, says: str
) -> None:
    mark = uuid.uuid4().hex
    start = time.monotonic()
    done, report = run_kit_report(
        "conformance",
        *SUBSET,
        "--call-timeout",
        timeout,
        "--impl",
        f"tests/hostile/{hostile}.py:pjit_double",
        env={"KIT_RUN_MARK": mark},
        timeout=240,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert report is not None, done.stdout[-3000:]
    assert verdict(report) == "not conforming"
    found = statuses(report)
    assert found["call.smoke"] == "passed"
    messages = {c["id"]: c["message"] for c in report["checks"]}
    assert found["result.type"] == found["values.float32"] == status, messages
    message = next(c["message"] for c in report["checks"] if c["id"] == "result.type")
    assert says in message and "rerun:" in message and "input:" in message, message
    assert "**pjit_double conformance: NOT CONFORMING" in done.stdout
    assert f"| `result.type` | {status} |" in done.stdout
    # The failure block is what the person reads, not the kit's frames.
    assert "conformance/kit.py" not in done.stdout.split("= FAILURES =")[-1].split("= pjit_double")[0]
    assert not _left_behind(mark)
    print(f"{hostile}: {elapsed:.1f} s")


@pytest.mark.slow
def test_a_segfault_leaves_every_check_with_a_verdict() -> None:
    """The whole suite: every check reaches a verdict (none 'not run'), each crash in its own process."""
    mark = uuid.uuid4().hex
    done, report = run_kit_report(
        "conformance",
        "--impl",
        "tests/hostile/segfault.py:pjit_double",
        env={"KIT_RUN_MARK": mark},
        timeout=400,
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert report is not None and verdict(report) == "not conforming"
    found = statuses(report)
    assert set(found.values()) <= {"passed", "crashed"}, found
    assert found["result.type"] == "crashed"
    crashes = [c for c in report["checks"] if c["status"] == "crashed"]
    # One root cause, shown once: the other crashes point back to the first.
    assert done.stdout.count("the same failure as [") == len(crashes) - 1
    assert "where:    " in crashes[0]["message"] and "segfault.py" in crashes[0]["message"]
    assert not _left_behind(mark)


def test_an_implementation_that_exits_at_import_is_a_usage_error() -> None:
    done = run_kit("conformance", "--impl", "tests/hostile/exit_at_import.py:pjit_double")
    assert done.returncode == 4, done.stdout[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert errors and "loading it ended the process (exit status 0)" in errors[0]


def test_an_explicit_impl_without_the_suite_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    pass\n")
    done = run_kit(str(tmp_path), "--impl", "reference:pjit_double", cwd=tmp_path)
    assert done.returncode == 4, done.stdout[-2000:]
    assert "select it with `python -m pytest --pyargs conformance" in done.stderr
    assert "1 passed" not in done.stdout


def test_ctrl_c_gives_a_partial_verdict_and_leaves_nothing_behind(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    report_path = tmp_path / "report.json"
    env = child_env(KIT_RUN_MARK=mark)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "conformance"]
    argv += ["--conformance-report", str(report_path)]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # As in a terminal: SIGINT's default action, even where this test was started in the
        # background of a non-interactive shell (which ignores SIGINT, and children inherit that).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    seen, lines = 0, []
    for line in proc.stdout:  # a piped run shows each check's verdict as it ends
        lines.append(line)
        seen += " PASSED " in line
        if seen == 3:
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
            break
    rest, _ = proc.communicate(timeout=120)
    output = "".join(lines) + rest
    assert seen == 3, output[-3000:]
    assert proc.returncode == 2, output[-3000:]
    report = json.loads(report_path.read_text())
    assert verdict(report) == "partial"
    assert "passed" in statuses(report).values()
    assert "PARTIAL" in output and "CONFORMING**" not in output.replace("NOT CONFORMING", "")
    assert not _left_behind(mark)


@pytest.mark.slow
def test_a_huge_wrong_result_fails_without_exhausting_memory(tmp_path: Path) -> None:
    """Every result is 10**8 elements: the checks fail on it, and no process of the run passes 2 GB."""
    measure = (
        "import resource, subprocess, sys; "
        "done = subprocess.run(sys.argv[1:]); "
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "conformance", "-q"]
    argv += [
        "--impl",
        "tests/hostile/huge_result.py:pjit_double",
        "--conformance-report",
        str(tmp_path / "r.json"),
    ]
    for check_id in ("call.smoke", "result.type", "values.float32", "layout.mesh"):
        argv += ["--check", check_id]
    env = child_env()
    done = subprocess.run(
        [sys.executable, "-c", measure, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    returncode, peak_kib = map(int, done.stdout.strip().splitlines()[-1].split())
    assert returncode == 1, done.stdout[-3000:]
    assert "[result.type]" in done.stdout and "shape (100000320,)" in done.stdout
    assert "| `result.type` | failed |" in done.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert verdict(report) == "not conforming"
    assert statuses(report)["result.type"] == statuses(report)["values.float32"] == "failed"
    assert peak_kib < 2 * 2**20, f"peak RSS {peak_kib / 2**10:.0f} MiB"


def test_two_watched_workers_survive_crashes_too() -> None:
    """-n 2: each crash costs its check only; the remaining checks run in replacement workers."""
    mark = uuid.uuid4().hex
    done, report = run_kit_report(
        "conformance",
        "-n",
        "2",
        *SUBSET,
        "--check",
        "layout.mesh",
        "--impl",
        "tests/hostile/segfault.py:pjit_double",
        env={"KIT_RUN_MARK": mark},
        timeout=240,
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert report is not None and verdict(report) == "not conforming"
    found = statuses(report)
    assert found["call.smoke"] == "passed"
    assert found["result.type"] == found["values.float32"] == found["layout.mesh"] == "crashed", found
    assert not _left_behind(mark)
