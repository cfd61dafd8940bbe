"""Every way a run ends is a verdict: hostile implementations through the real suite, in real processes.

Each hostile implementation (tests/hostile/) wraps the reference and turns
hostile on vectors longer than 40 elements, so the gate checks pass and the
checks after them meet the hostile call.  Each run is checked for its exit
status, its table and its JSON report, and for processes left behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import _pytest
import hypothesis
import pluggy
import pytest
import xdist

import conformance
from tests.kit_process import ROOT, child_env, run_kit, run_kit_report, statuses, verdict

# Two checks behind the gates: the second shows that a fresh process ran it.
SUBSET = ("--check", "call.smoke", "--check", "result.type", "--check", "values.float32")


def _package_paths(*packages: object) -> re.Pattern[str]:
    """A path to a Python file of one of these installed packages, however pytest or a traceback
    writes it: absolute, relative to the repository, or as ``site-packages/<name>/...``."""
    forms = []
    for package in packages:
        folder = Path(package.__file__).resolve().parent  # type: ignore[attr-defined]
        forms += [re.escape(str(folder)), re.escape(f"{folder.parent.name}/{folder.name}")]
        if folder.is_relative_to(ROOT):  # pytest writes paths under its rootdir relative to it
            forms.append(r"(?<![\w.-])" + re.escape(folder.relative_to(ROOT).as_posix()))
    return re.compile("(?:" + "|".join(forms) + r")/[\w./-]*\.py")


# The kit's own package (conformance/, conformance/_src/...) and the machinery it runs on.
KIT_FILES = _package_paths(conformance, hypothesis, _pytest, pluggy, xdist)
# What a traceback or Hypothesis's notes look like, whoever's frames they show.
TRACEBACK_LINES = re.compile(
    r"Traceback \(most recent call last\)|^\s*File \"|^\S+\.py:\d+: |^[E>] |"
    r"Falsifying example|reproduce_failure|Trying example|You can add @seed|^\s*\| "
)


def failure_block(stdout: str) -> list[str]:
    """The lines of pytest's FAILURES section, without its per-test title lines (``____ name ____``)
    and pytest-xdist's ``[gw0] linux -- Python ...`` line."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ FAILURES =+", line)) + 1
    block = []
    for line in lines[start:]:
        if re.fullmatch(r"=+ .* =+", line):
            break
        if re.fullmatch(r"_+ .* _+", line) or re.match(r"\[gw\d+\] \S+ -- Python ", line):
            continue
        block.append(line)
    return block


def kit_frames(block: list[str]) -> list[str]:
    """The lines of a failure block that show a frame or a file of the kit, of pytest or of Hypothesis,
    or a traceback at all: the README promises the person reads the kit's message, not those."""
    return [line for line in block if KIT_FILES.search(line) or TRACEBACK_LINES.search(line)]


def test_kit_frames_finds_a_frame_of_the_kit() -> None:
    """The detector itself, on the README's block and on the tracebacks it must catch."""
    readme = (ROOT / "README.md").read_text()
    example = readme.split("### Reading a failure", 1)[1].split("```", 2)[1].splitlines()[2:]
    assert example and not kit_frames(example), kit_frames(example)
    kit_file = Path(conformance.__file__).resolve().parent / "_src" / "running" / "kit.py"
    for frame in (
        f"{kit_file.relative_to(ROOT).as_posix()}:330: in run_check",  # pytest, --tb=long
        f'  File "{kit_file}", line 330, in run_check',  # Python's traceback
        f"  where:    tests/hostile/segfault.py, line 10, in pjit_double <- {kit_file}, line 144, in observe",
        f"{Path(hypothesis.__file__).resolve().parent / 'core.py'}:1200: in run",
        "Falsifying example: test_check(",
    ):
        assert kit_frames([*example, frame]) == [frame], frame


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
    # The failure block is what the person reads, not the kit's frames (README, "Reading a failure").
    block = failure_block(done.stdout)
    assert any(line.startswith("[result.type] ") for line in block), "\n".join(block)
    assert not kit_frames(block), "\n".join(["frames of the kit in the failure block:", *kit_frames(block)])
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


def test_a_huge_wrong_result_fails_without_exhausting_memory(tmp_path: Path) -> None:
    """Every result is 10**8 elements: the first call fails (far larger than its input), the
    implementation is not called again, and no process of the run passes 2 GB."""
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
    assert "[call.smoke] the result is far larger than the input" in done.stdout, done.stdout[-3000:]
    assert "| `call.smoke` | failed |" in done.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert verdict(report) == "not conforming"
    assert statuses(report)["result.type"] == statuses(report)["values.float32"] == "not run"
    assert peak_kib < 2 * 2**20, f"peak RSS {peak_kib / 2**10:.0f} MiB"


def _huge_run(tmp_path: Path, size: int) -> tuple[int, int, dict[str, Any]]:
    """A default run on tests/hostile/huge_from_five.py with results of ``size`` bytes: its exit
    status, the peak RSS of its processes (KiB) and its JSON report."""
    measure = (
        "import resource, subprocess, sys; "
        "done = subprocess.run(sys.argv[1:]); "
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "conformance", "-q"]
    argv += ["--impl", "tests/hostile/huge_from_five.py:pjit_double"]
    argv += ["--conformance-report", str(tmp_path / "r.json")]
    env = child_env(KIT_HOSTILE_BYTES=str(size))
    done = subprocess.run(
        [sys.executable, "-c", measure, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    returncode, peak_kib = map(int, done.stdout.strip().splitlines()[-1].split())
    assert returncode == 1, done.stdout[-3000:]
    return returncode, peak_kib, json.loads((tmp_path / "r.json").read_text())


@pytest.mark.slow
def test_results_are_judged_and_dropped_across_a_whole_default_run(tmp_path: Path) -> None:
    """Issue 27 (7), below the runaway bound: 40 MB results for vectors of 5 elements or more,
    through every check of a default run.  Results kept across checks (a failure's frames held
    by Hypothesis, one call per check in the shared pass) took such runs past 4 GB; judged and
    dropped, no process of it passes 2 GB, and the wrong shape is still named."""
    _, peak_kib, report = _huge_run(tmp_path, 40_000_000)
    assert verdict(report) == "not conforming"
    assert statuses(report)["result.type"] == "failed"
    assert statuses(report)["dtype.preserved"] == "passed"  # right below 5 elements, right dtype above
    assert peak_kib < 2 * 2**20, f"peak RSS {peak_kib / 2**10:.0f} MiB"


def test_a_result_far_larger_than_its_input_ends_the_calls(tmp_path: Path) -> None:
    """Past 64 MiB and 16x its input, a result fails its check and the implementation is not
    called again (as after a hang): the run ends at once, in bounded memory, with a verdict."""
    _, peak_kib, report = _huge_run(tmp_path, 80_000_000)
    assert verdict(report) == "not conforming"
    found = statuses(report)
    assert found["call.smoke"] == "failed", found
    message = next(c["message"] for c in report["checks"] if c["id"] == "call.smoke")
    assert "the result is far larger than the input" in message and "76 MiB" in message, message
    assert {s for c, s in found.items() if c != "call.smoke"} <= {"not run", "failed"}, found
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


def test_a_process_that_ends_after_a_call_returned_is_rerun_with_that_call(tmp_path: Path) -> None:
    """A crash outside a call (while the kit judged the result, or in the agreement step of a
    multi-process run) names the last call's input and gives its rerun line; with no call yet
    there is nothing to rerun."""
    from conformance._src.calling.supervise import CallLog, crash_verdict

    log = CallLog(tmp_path / "log.json")
    log.begin("values.float32", "length 3, dtype float32", "python -m pytest ... --case eNoX", 60.0)
    log.end("values.float32")
    entry = json.loads((tmp_path / "log.json").read_text())
    assert "deadline" not in entry, entry
    message = crash_verdict("values.float32", entry, -6, False, None, 60.0).message
    assert "outside a call of the implementation" in message, message
    assert "  after:    the call on length 3, dtype float32 returned" in message, message
    assert "  rerun:    python -m pytest ... --case eNoX" in message, message
    first = crash_verdict("values.float32", {"check": "values.float32"}, -6, False, None, 60.0)
    assert "rerun" not in first.message
