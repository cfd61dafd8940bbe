"""The plug-in end to end: verdicts, report files, --list-checks, --xfail-file, -n 2, replays, hangs.

Verdicts are read from the run's JSON report (``run_kit_report``); the
terminal output is asserted on only where a test is about what it prints.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conformance._src.contract import checks  # noqa: F401 -- registers the checks
from conformance._src.contract.catalogue import CHECKS, ids_for
from conformance._src.inputs.coverage import TIERS
from tests.kit_process import ROOT, read_report, run_kit, run_kit_report, statuses, verdict
from tests.kit_server import KitServer

SEED_SOLUTION = "tests/impls/seed_solution.py:pjit_double"
SCHEMA = json.loads((ROOT / "conformance" / "report-schema.json").read_text())

TRIPLING = """
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

def pjit_double(x, *, mesh=None):  # three times x, otherwise by the contract
    m = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
    s = NamedSharding(m, PartitionSpec("data"))
    if x.shape[0] % m.shape["data"]:
        raise ValueError("length not divisible by the data axis")
    if isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(s, 1):
        x = jax.device_put(x, s)
    return jax.jit(lambda v: 3 * v, in_shardings=s, out_shardings=s)(x)
"""

HANGING = """
import threading
from reference import pjit_double as _reference

def pjit_double(x, *, mesh=None):
    if x.shape[0] > 40:
        threading.Event().wait()  # a collective that never completes
    return _reference(x, mesh=mesh)
"""


def _ran(report: dict[str, Any]) -> dict[str, str]:
    """The statuses of the checks that ran (a report may list those --check left out, as not run)."""
    return {check_id: status for check_id, status in statuses(report).items() if status != "not run"}


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return f"{path}:pjit_double"


def test_reference_conforms_and_the_report_follows_its_schema(tmp_path: Path) -> None:
    done, report = run_kit_report("conformance", "--conformance-report", str(tmp_path / "out" / "report.md"))
    assert done.returncode == 0, done.stdout[-3000:]
    assert report is not None, done.stdout[-3000:]
    assert "**pjit_double conformance: CONFORMING**" in done.stdout  # the table ends the run
    assert re.search(
        r"^timing: \d+ examples \(\d+ drawn from earlier checks'\), \d+ implementation calls, "
        r"\d+ backend compiles",
        done.stdout,
        re.M,
    )
    assert report == json.loads((tmp_path / "out" / "report.json").read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["verdict"]["conforming"] is True and verdict(report) == "conforming"
    assert [c["id"] for c in report["checks"]] == ids_for(declared=False)
    assert all(c["status"] == "passed" and c["examples"] >= 1 for c in report["checks"])
    # Checks judged inputs that earlier checks ran (pool.py): fewer calls than inputs judged.
    assert report["timing"]["reused"] == sum(c["reused"] for c in report["checks"]) > 0
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert all(f"| `{check_id}` | passed |" in markdown for check_id in ids_for(declared=False))
    # The coverage table: every cell of every check's domain judged, in Markdown and JSON.
    coverage = {c["id"]: c["coverage"] for c in report["checks"]}
    # The design's 40 groups, each with 7 placements (coverage.design).
    assert coverage["values.all-dtypes"]["cells"] == coverage["jit.shardings"]["cells"] == 280
    assert coverage["layout.default-device"]["cells"] == 70
    # float32 meets every mesh kind and every length (4 groups), and every mesh kind in a length
    # with room for every edge value (coverage.ROOMY): 2 more groups, 6 x 7 placements.
    assert coverage["values.float32"]["cells"] == 42
    for check_id, cells in coverage.items():
        assert cells["unvisited"] == [], check_id
        assert len(cells["inputs"]) >= cells["cells"] and sum(cells["inputs"].values()) >= cells["scheduled"]
    assert "| `hygiene.input-intact` | 280 of 280 |" in markdown
    # Every dtype meets every tier of long lengths, past 32 MiB too (coverage.TIERS): values, layout and
    # no false error judged there (shared_pass.HUGE_JUDGES).
    tiers = {c["id"]: set(c["tiers"]) for c in report["checks"]}
    dtypes = {cell.split(" / ")[0] for cell in coverage["values.all-dtypes"]["inputs"]}
    for check_id in ("values.all-dtypes", "layout.shards"):
        assert tiers[check_id] == {f"{t}: {d}" for t in TIERS for d in dtypes}, check_id
    assert {k for k in tiers["inputs.placements"] if k.startswith("32 MiB")} == set()
    for check_id in ("values.float32", "layout.default-device", "layout.mesh", "divisibility.no-false-error"):
        assert any(k.startswith("32 MiB: ") for k in tiers[check_id]), check_id
    assert "Long lengths by tier" in markdown
    assert "Every cell of every check's domain was visited." in markdown
    assert isinstance(report["run"]["schedule_seed"], int)


def test_the_exercise_solution_passes_seed_and_fails_full_for_mesh() -> None:
    seed, seed_report = run_kit_report("conformance", "--contract", "seed", "--impl", SEED_SOLUTION)
    assert seed.returncode == 0, seed.stdout[-3000:]
    assert seed_report is not None and verdict(seed_report) == "conforming", seed.stdout[-3000:]
    seed_status = statuses(seed_report)
    assert seed_status["values.float32"] == "passed" and seed_status["layout.mesh"] == "not applicable"
    full, full_report = run_kit_report("conformance", "--impl", SEED_SOLUTION)
    assert full.returncode == 1
    assert full_report is not None and verdict(full_report) == "not conforming", full.stdout[-3000:]
    assert statuses(full_report)["api.mesh-keyword"] == "failed"
    message = next(c["message"] for c in full_report["checks"] if c["id"] == "api.mesh-keyword")
    assert "`mesh` is not supported" in message
    assert "unexpected keyword argument 'mesh'" in message


def test_list_checks_prints_every_id_with_its_contracts() -> None:
    done = run_kit("conformance", "--list-checks")
    assert done.returncode == 0
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    from conformance._src.running import declared_checks as _declared  # noqa: F401 -- and the declared ones
    from conformance._src.running import platform_checks as _platform  # noqa: F401 -- and the accelerator's

    for check_id, check in CHECKS.items():
        assert check_id in lines
        kind = (
            "accel run"
            if check.part
            else "declared"
            if check.declared
            else "seed+full"
            if not check.needs_mesh
            else "full only"
        )
        assert kind in lines[check_id]
    assert "fn.histories" in lines


XFAIL_FILE = (
    "# adopted before we cache every mesh's jit\ncompile.once\twe keep the last mesh's jit only\n"
    "state.histories  the same, over any history\n"
)
# One mesh's jit kept at a time: compile.once and state.histories fail, every other check passes.
SINGLE_ENTRY = "tests/mutants/r_cache_single_entry.py:pjit_double"


@pytest.mark.slow
def test_xfail_file_turns_a_listed_failure_into_xfailed(tmp_path: Path, kit_server: KitServer) -> None:
    """The whole suite, in one process (the warm kit process: tests/kit_server.py)."""
    xfail = tmp_path / "xfail.txt"
    xfail.write_text(XFAIL_FILE)
    report_path = tmp_path / "report.json"
    returncode, output = kit_server.run(
        [
            "conformance",
            "-p",
            "no:cacheprovider",
            "-rA",
            "-v",
            "-n",
            "0",
            "--impl",
            SINGLE_ENTRY,
            "--xfail-file",
            str(xfail),
            "--conformance-report",
            str(report_path),
        ],
        timeout=600,
    )
    report = read_report(report_path)
    assert returncode == 0, output[-3000:]
    assert report is not None, output[-3000:]
    jsonschema.validate(report, SCHEMA)
    assert verdict(report) == "conforming"
    status = statuses(report)
    assert status["compile.once"] == status["state.histories"] == "xfailed"
    listed = next(c for c in report["checks"] if c["id"] == "compile.once")
    assert listed["xfail_reason"] == "we keep the last mesh's jit only"
    assert report["verdict"]["xfails"] == {
        "compile.once": "we keep the last mesh's jit only",
        "state.histories": "the same, over any history",
    }
    assert all(s == "passed" for c, s in status.items() if c not in ("compile.once", "state.histories"))
    # The header says the verdict leans on the file, and lists the file's reasons.
    assert "CONFORMING, with 2 expected failure(s) listed in --xfail-file" in output
    assert "- `compile.once`: we keep the last mesh's jit only" in output


def test_an_xfailed_gate_leaves_the_run_partial(tmp_path: Path) -> None:
    """Listing a gate expects its failure, but the checks behind it never ran: not a conforming run."""
    xfail = tmp_path / "xfail.txt"
    xfail.write_text("api.mesh-keyword   no mesh= yet\n")
    done, report = run_kit_report("conformance", "--impl", SEED_SOLUTION, "--xfail-file", str(xfail))
    assert done.returncode == 2, done.stdout[-3000:]
    assert report is not None and verdict(report) == "partial"
    status = statuses(report)
    assert status["api.mesh-keyword"] == "xfailed"
    assert status["layout.mesh"] == "not run"  # behind the failed gate


def test_xfail_file_fails_the_run_when_a_listed_check_passes(tmp_path: Path) -> None:
    xfail = tmp_path / "xfail.txt"
    xfail.write_text("call.smoke  thought it was broken\n")
    done, report = run_kit_report("conformance", "--check", "call.smoke", "--xfail-file", str(xfail))
    assert done.returncode == 1
    assert report is not None, done.stdout[-3000:]
    assert verdict(report) == "not conforming"
    assert statuses(report)["call.smoke"] == "failed"
    assert "XPASS(strict)" in done.stdout


def test_xfail_file_with_an_unknown_id_is_a_usage_error(tmp_path: Path) -> None:
    xfail = tmp_path / "xfail.txt"
    xfail.write_text("values.float33  typo\n")
    done = run_kit("conformance", "--xfail-file", str(xfail))
    assert done.returncode == 4
    assert "line 1: no check has the ID 'values.float33'" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_xdist_workers_results_merge_into_one_report(tmp_path: Path) -> None:
    """Two watched workers: their verdicts meet in one report, --xfail-file's reasons applied
    in the controller to a verdict a worker gave, a failure's message and counterexample kept."""
    xfail = tmp_path / "xfail.txt"
    xfail.write_text("values.all-dtypes\ttriples every dtype, not only float32\n")
    wanted = [
        "call.smoke",
        "values.float32",
        "values.all-dtypes",
        "hygiene.global-state",
        "divisibility.error",
    ]
    args = [arg for check_id in wanted for arg in ("--check", check_id)]
    done, report = run_kit_report(
        "conformance",
        "-n",
        "2",
        *args,
        "--impl",
        _write(tmp_path, "triple.py", TRIPLING),
        "--xfail-file",
        str(xfail),
        "--conformance-report",
        str(tmp_path / "r.json"),
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert report is not None, done.stdout[-3000:]
    jsonschema.validate(report, SCHEMA)
    assert verdict(report) == "not conforming"
    assert _ran(report) == {
        "call.smoke": "passed",
        "values.float32": "failed",
        "values.all-dtypes": "xfailed",
        "hygiene.global-state": "passed",
        "divisibility.error": "passed",
    }
    assert report["verdict"]["xfails"] == {"values.all-dtypes": "triples every dtype, not only float32"}
    listed = next(c for c in report["checks"] if c["id"] == "values.all-dtypes")
    assert listed["xfail_reason"] == "triples every dtype, not only float32"
    failed = next(c for c in report["checks"] if c["id"] == "values.float32")
    assert "result values are not the input doubled" in failed["message"]
    assert failed["counterexample"] and failed["examples"] >= 1


def test_the_printed_rerun_command_replays_the_same_failure(tmp_path: Path) -> None:
    impl = _write(tmp_path, "triple.py", TRIPLING)
    first, first_report = run_kit_report("conformance", "--impl", impl, "--check", "values.float32")
    assert first.returncode == 1
    assert first_report is not None and _ran(first_report) == {"values.float32": "failed"}
    rerun = re.findall(r"rerun:\s+(python -m pytest .*)$", first.stdout, re.M)[-1]
    inputs = re.findall(r"input:\s+(.*)$", first.stdout, re.M)[-1]
    args = shlex.split(rerun)[3:]  # drop "python -m pytest"
    assert "--case" in args
    again, again_report = run_kit_report(*args)
    assert again.returncode == 1
    assert again_report is not None and _ran(again_report) == {"values.float32": "failed"}
    assert inputs in again.stdout  # exactly that input again


@pytest.mark.parametrize("timeout", [2.0])
def test_a_hung_implementation_fails_each_check_in_a_fresh_process(tmp_path: Path, timeout: float) -> None:
    """Supervised (the default): the watchdog ends each hung call; the next check runs in a new worker."""
    start = time.monotonic()
    wanted = ["call.smoke", "result.type", "values.float32"]
    done, report = run_kit_report(
        "conformance",
        *[arg for check_id in wanted for arg in ("--check", check_id)],
        "--impl",
        _write(tmp_path, "hang.py", HANGING),
        "--call-timeout",
        str(timeout),
        timeout=300,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 1, done.stdout[-3000:]
    assert report is not None and verdict(report) == "not conforming", done.stdout[-3000:]
    status = statuses(report)
    assert status["result.type"] == status["values.float32"] == "failed"
    messages = {c["id"]: c["message"] for c in report["checks"]}
    assert "the call did not return" in messages["result.type"]
    assert f"still running after {timeout:g} s" in messages["values.float32"]
    # Two timeouts, two fresh workers (~5 s each here), generous for a loaded machine.
    assert elapsed < 2 * timeout + 90, elapsed


def test_a_hung_implementation_unsupervised_is_not_called_again(tmp_path: Path) -> None:
    """-n 0 runs in one process: after a hang the implementation is not called again."""
    done, report = run_kit_report(
        "conformance",
        "-n",
        "0",
        "--impl",
        _write(tmp_path, "hang.py", HANGING),
        "--call-timeout",
        "2",
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert report is not None and verdict(report) == "not conforming"
    assert "did not return within --call-timeout=2 s" in done.stdout
    assert "it will not be called again" in done.stdout.lower()
