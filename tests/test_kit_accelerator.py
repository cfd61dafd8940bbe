"""An accelerator run (conformance/_src/calling/chips.py): the chips' part and what the run says.

On a machine without an accelerator (CI) the chips' part runs with the CPU devices standing in
for the chips (``--chip-part``), and the one-command run over a real TPU skips, saying why.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance._src.calling import chips as chip
from conformance._src.report import Report, where_table
from conformance._src.verdict import CheckVerdict, Status
from tests.kit_process import ROOT, child_env, run_kit_report, statuses, verdict


@pytest.mark.parametrize(
    ("platforms", "expected"),
    [("", None), ("cpu", None), ("tpu", "tpu"), ("tpu,cpu", "tpu"), ("cpu,cuda", "cuda")],
)
def test_the_accelerator_is_the_first_platform_jax_platforms_names_besides_cpu(
    platforms: str, expected: str | None
) -> None:
    assert chip.accelerator(platforms) == expected


def test_the_report_says_where_each_check_ran() -> None:
    report = Report(spec="m:f", impl_version=None, contract="full", profile="default", seed=None, devices=8)
    report.add(CheckVerdict("call.smoke", status=Status.PASSED))
    report.add(
        CheckVerdict(
            "platform.chips",
            status=Status.PASSED,
            where={"call.smoke": "passed", "state.first-call": "not applicable: needs 2 devices"},
        )
    )
    table = "\n".join(where_table(report))
    assert "| `call.smoke` | passed | passed |" in table
    assert "| `state.first-call` | - | not applicable: needs 2 devices |" in table
    assert (
        where_table(
            Report(spec="m:f", impl_version=None, contract="full", profile="default", seed=None, devices=8)
        )
        == []
    )


def test_a_chips_part_past_its_deadline_is_ended_and_said(tmp_path: Path) -> None:
    hung = subprocess.Popen(["sleep", "60"], start_new_session=True)
    (tmp_path / "pid").write_text(str(hung.pid))
    part = chip.wait(tmp_path, deadline=0.5, poll=0.1)
    assert part.returncode is None and part.verdict is None
    assert hung.wait(timeout=10) != 0  # ended by the wait, not left behind


def test_a_chips_part_that_ended_without_saying_so_is_not_waited_for(tmp_path: Path) -> None:
    ended = subprocess.Popen(["true"])
    (tmp_path / "pid").write_text(str(ended.pid))
    part = chip.wait(tmp_path, deadline=60, poll=0.1)  # a zombie until reaped: not running
    ended.wait()
    assert part.returncode == -1 and part.verdict is None


CHIPS_PART = ("-n", "0", "--devices", "2", "--chip-part", "2", "--check", "platform.agrees")


def test_the_chips_part_compares_its_results_with_the_cpus() -> None:
    done, report = run_kit_report("conformance", "--impl", "reference:pjit_double", *CHIPS_PART)
    assert report is not None, done.stdout[-2000:]
    assert statuses(report)["platform.agrees"] == "passed", done.stdout[-3000:]


def test_a_result_that_differs_from_the_cpus_fails_platform_agrees_with_a_rerun_of_that_part() -> None:
    done, report = run_kit_report(
        "conformance", "--impl", "tests/impls/platform_dependent.py:pjit_double", *CHIPS_PART
    )
    assert report is not None, done.stdout[-2000:]
    assert verdict(report) == "not conforming"
    message = next(c["message"] for c in report["checks"] if c["id"] == "platform.agrees")
    assert "the chips' result differs from the CPU's" in message
    assert "rerun:    JAX_PLATFORMS=" in message and "-n 0 --chip-part 2" in message, message


def _tpu() -> bool:
    probe = subprocess.run(
        [sys.executable, "-c", "import jax; jax.devices('tpu')"],
        env=child_env(JAX_PLATFORMS="tpu"),
        capture_output=True,
        timeout=300,
        check=False,
    )
    return probe.returncode == 0


def test_one_command_judges_the_tpu_and_forced_cpu_devices() -> None:
    if not _tpu():
        pytest.skip("no TPU here (JAX_PLATFORMS=tpu does not start): an accelerator run needs one")
    done, report = run_kit_report(
        "conformance", "--impl", "reference:pjit_double", env={"JAX_PLATFORMS": "tpu"}, cwd=ROOT
    )
    assert report is not None, done.stdout[-3000:]
    assert done.returncode == 0, done.stdout[-3000:]
    where = next(c["where"] for c in report["checks"] if c["id"] == "platform.chips")
    assert where["platform.agrees"] == "passed"
    assert where["values.all-dtypes"] == "passed"
