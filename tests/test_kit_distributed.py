"""Multi-process conformance: the local launcher with 2 processes x 4 CPU devices (gloo on loopback)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from conformance._src.calling.distributed import Ending, combined_status, kit_error_first
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


@pytest.mark.slow
def test_an_input_moved_with_device_put_conforms_across_two_processes() -> None:
    """JAX's documented move of an input in another layout, ``jax.device_put(x, target)``: where this
    JAX refuses it (an input each process holds on its own device, bound for a layout with another
    process's devices), the input is not judged, and the report names JAX's limit."""
    done, _ = launch("--impl", "tests/distributed/device_put_target.py:pjit_double")
    assert done.returncode == 0, done.stdout[-6000:]
    assert "process 0: 0, process 1: 0 -> exit status 0" in done.stdout
    assert "**pjit_double conformance: CONFORMING**" in done.stdout
    assert "Not judged, for JAX's own limit -- across processes, jax.device_put" in done.stdout


def _ended(rank: int, status: int, at: float, done_at: float | None = None, **how: bool) -> Ending:
    return Ending(rank, status, done_at is not None, at=at, done_at=done_at, **how)


@pytest.mark.parametrize(
    "endings, status",
    [
        ([_ended(0, 0, 9, 8), _ended(1, 0, 9, 8)], 0),
        ([_ended(0, 1, 9, 8), _ended(1, 1, 9, 8)], 1),
        ([_ended(0, 0, 9, 8), _ended(1, 2, 9, 8)], 2),  # one process's partial run is no failure
        ([_ended(0, 1, 9, 8), _ended(1, 2, 9, 8)], 1),
        ([_ended(0, 3, 9, 8), _ended(1, 3, 9, 8)], 3),
        ([_ended(0, 0, 9, 8), _ended(1, 3, 9, 8)], 3),
        ([_ended(0, 2, 9, 8), _ended(1, 3, 9, 8)], 3),
        ([_ended(0, 4, 1), _ended(1, 3, 9, 8)], 4),
        # issue 40: process 1's kit error, then process 0 aborted by JAX's coordination service
        ([_ended(0, -6, 10.5), _ended(1, 3, 10.1, 10.0)], 3),
        ([_ended(0, -6, 10.5, 9.0), _ended(1, 3, 10.1, 10.0)], 3),  # aborted at exit, after its own end
        ([_ended(0, -6, 10.0), _ended(1, 3, 10.1, 10.0)], 3),  # seen in the same look
        ([_ended(0, 1, 40.0, 39.9), _ended(1, 3, 10.1, 10.0)], 3),  # its agreement steps failed after
        ([_ended(0, -9, 70.0, killed=True), _ended(1, 3, 10.1, 10.0)], 3),  # ended by the launcher
        # a crash or a failure before any kit error is the verdict
        ([_ended(0, -11, 5.0), _ended(1, 3, 6.1, 6.0)], 1),
        ([_ended(0, 1, 5.0, 4.9), _ended(1, 3, 6.1, 6.0)], 1),
        ([_ended(0, -6, 5.0), _ended(1, 0, 6.1, 6.0)], 1),
    ],
)
def test_the_launchers_status_from_its_processes(endings: list[Ending], status: int) -> None:
    assert combined_status(endings) == status
    first = kit_error_first(endings)
    assert (first is not None) is (status == 3)
    assert first is None or first.returncode == 3


KIT_ERROR_THEN_ABORT_PLUGIN = """
import os
import time
from pathlib import Path

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if config.getoption("--process-id") == 1:
        from jax._src import distributed

        distributed.global_state.client = None  # process 1's cluster probe fails: a kit error


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    if item.config.getoption("--process-id") == 0:
        # In its check, once process 1 is through with its kit error, process 0 aborts, as JAX's
        # coordination service aborts a process whose peer left the job.
        folder = Path(os.environ["CONFORMANCE_CLUSTER_STATE"])
        deadline = time.monotonic() + 240
        while not (folder / "process-1.done").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.abort()
"""


def test_a_kit_error_on_one_process_is_the_runs_verdict_whatever_the_others_did_after_it(tmp_path) -> None:
    """Issue 40: process 1 ends KIT ERROR; process 0, in its check, is aborted after that."""
    (tmp_path / "kit_error_then_abort.py").write_text(KIT_ERROR_THEN_ABORT_PLUGIN)
    report = tmp_path / "report.json"
    done, _ = launch(
        "--check",
        "values.float32",
        "--conformance-report",
        str(report),
        env={"PYTEST_PLUGINS": "kit_error_then_abort", "PYTHONPATH": str(tmp_path)},
        timeout=300,
    )
    assert "process 0: -6, process 1: 3 -> exit status 3" in done.stdout, done.stdout[-4000:]
    assert done.returncode == 3
    assert "process 1 ended with a kit error (exit 3) before any other ended badly" in done.stdout
    assert "process 0: killed by signal 6 (SIGABRT)" in done.stdout
    assert "conformance: KIT ERROR" in done.stdout  # process 1's table, which process 0 never gave
    found = json.loads(report.read_text())
    assert found["verdict"]["status"] == "kit error"
    assert [c["status"] for c in found["checks"] if c["id"] == "values.float32"] == ["kit error"]


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
