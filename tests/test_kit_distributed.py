"""Multi-process conformance: the local launcher with 2 processes x 4 CPU devices (gloo on loopback)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from tests.kit_process import ROOT, child_env


def launch(
    *pytest_args: str,
    timeout: float = 600,
    processes: int = 2,
    devices_per_process: int = 4,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.launch",
            "--processes",
            str(processes),
            "--devices-per-process",
            str(devices_per_process),
            "--grace",
            "60",
            "--",
            "conformance",
            "-p",
            "no:cacheprovider",
            "-q",
            *pytest_args,
        ],
        cwd=ROOT,
        env=child_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, time.monotonic() - start


@pytest.mark.slow
def test_reference_conforms_across_two_processes() -> None:
    done, _ = launch()
    assert done.returncode == 0, done.stdout[-4000:]
    assert "process 0: 0, process 1: 0 -> exit status 0" in done.stdout
    assert "**pjit_double conformance: CONFORMING**" in done.stdout
    assert "8 devices" in done.stdout  # one job over both processes' devices
    assert done.stdout.count("pjit_double conformance ==") == 1  # only process 0 reports


def test_a_failure_on_process_1_shards_fails_the_run_everywhere() -> None:
    done, _ = launch(
        "--impl",
        "tests/distributed/wrong_on_process_1.py:pjit_double",
        "--check",
        "values.float32",
        "--check",
        "layout.mesh",
    )
    assert done.returncode == 1, done.stdout[-4000:]
    # process 0's own shards are right: it fails because process 1 reported a failure
    assert "the check failed on process(es) [1]" in done.stdout
    assert re.search(r"process 0: 1, process 1: 1 -> exit status 1", done.stdout)


@pytest.mark.slow
def test_reference_conforms_across_four_processes_of_two_devices() -> None:
    done, _ = launch(processes=4, devices_per_process=2)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "process 0: 0, process 1: 0, process 2: 0, process 3: 0 -> exit status 0" in done.stdout
    assert "**pjit_double conformance: CONFORMING**" in done.stdout
    assert "8 devices" in done.stdout and "4 processes" in done.stdout
    assert done.stdout.count("pjit_double conformance ==") == 1  # only process 0 reports


def test_a_failure_on_the_last_of_four_processes_fails_the_run_everywhere() -> None:
    done, _ = launch(
        "--impl",
        "tests/distributed/wrong_on_process_1.py:pjit_double",
        "--check",
        "values.float32",
        processes=4,
        devices_per_process=2,
        env={"KIT_WRONG_PROCESS": "3"},
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert "the check failed on process(es) [3]" in done.stdout
    assert re.search(r"process 0: 1, process 1: 1, process 2: 1, process 3: 1 -> exit status 1", done.stdout)


def test_a_deadlock_on_one_process_ends_the_run_failing_without_hanging() -> None:
    timeout = 5
    done, elapsed = launch(
        "--impl",
        "tests/distributed/process_0_only.py:pjit_double",
        "--call-timeout",
        str(timeout),
        timeout=400,
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert "did not return within --call-timeout=5 s" in done.stdout
    assert elapsed < 5 * timeout + 120, elapsed
    assert (
        subprocess.run(["pgrep", "-f", "process_0_only.py"], capture_output=True).returncode == 1
    )  # no orphans


def test_a_process_that_aborts_outside_a_call_still_gives_the_table_and_the_reports(tmp_path) -> None:
    report = tmp_path / "report.md"
    done, _ = launch(
        "--impl",
        "tests/distributed/abort_on_process_1.py:pjit_double",
        "--check",
        "values.float32",
        "--conformance-report",
        str(report),
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert "process 1 of 2 ended" in done.stdout and "SIGABRT" in done.stdout
    assert "| `values.float32` | crashed |" in done.stdout  # the table, with the check named
    assert "rerun:    python -m conformance.launch --processes 2" in done.stdout
    assert "conformance: NOT CONFORMING" in done.stdout
    assert "`values.float32` | crashed" in report.read_text()
    data = json.loads(report.with_suffix(".json").read_text())
    assert data["verdict"]["status"] == "not conforming"
    assert [c["status"] for c in data["checks"] if c["id"] == "values.float32"] == ["crashed"]


def test_an_input_moved_through_the_host_is_caught_across_processes() -> None:
    done, _ = launch(
        "--impl",
        "tests/distributed/through_the_host.py:pjit_double",
        "--check",
        "values.float32",
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert "spans non-addressable" in done.stdout  # np.asarray of an array no process holds whole
