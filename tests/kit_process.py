"""Running the kit as a user does: ``python -m pytest conformance ...`` in a real process.

The kit's own tests read what a run concluded from its JSON report
(``--conformance-report``, ``conformance/report-schema.json``), never from
pytest's terminal lines: ``run_kit_report`` runs the suite with a report and
returns it parsed, ``statuses`` and ``verdict`` read it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Settings of the caller's shell that would change what a child process does.
SCRUBBED = (
    "XLA_FLAGS",
    "JAX_PLATFORMS",
    "JAX_NUM_CPU_DEVICES",
    "JAX_ENABLE_X64",
    "CONFORMANCE_IMPL",
    "CONFORMANCE_CHIP_PART",  # an accelerator run's (calling/chips.py)
    "CONFORMANCE_ACCELERATOR",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "HYPOTHESIS_PROFILE",
    # Hypothesis loads its `ci` profile when one of these is set (hypothesis/_settings.py,
    # is_in_ci); a child of the kit's tests gets the default profile unless a test asks.
    "CI",
    "__TOX_ENVIRONMENT_VARIABLE_ORIGINAL_CI",
    "TF_BUILD",
    "bamboo.buildKey",
    "BUILDKITE",
    "CIRCLECI",
    "CIRRUS_CI",
    "CODEBUILD_BUILD_ID",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "HEROKU_TEST_RUN_ID",
    "TEAMCITY_VERSION",
)


def child_env(tmp: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without ``SCRUBBED``, with ``tmp`` first on
    PYTHONPATH and ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    if tmp is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tmp), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


REPORT_OPTION = "--conformance-report"
# A check with one of these statuses found the implementation broken.
BROKEN = frozenset({"failed", "crashed"})


def run_kit(
    *args: str,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    """Run pytest on the conformance suite in ``child_env`` (so the default profile applies)."""
    full_env = child_env(**(env or {}))
    return subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-v", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _report_path(args: tuple[str, ...], cwd: Path) -> Path | None:
    """Where the JSON report of a run with ``args`` lands, if they name one (the last one wins)."""
    found = None
    for i, arg in enumerate(args):
        if arg == REPORT_OPTION and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(REPORT_OPTION + "="):
            found = arg.split("=", 1)[1]
    if found is None:
        return None
    path = cwd / found  # an absolute ``found`` stays as it is
    return path.with_suffix(".json") if path.suffix == ".md" else path


def read_report(path: Path) -> dict[str, Any] | None:
    """The parsed JSON report at ``path``; None if the run wrote none."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def run_kit_report(
    *args: str,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    python: str = sys.executable,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``run_kit`` with a JSON report: the finished process and the report (None if none was written).

    When ``args`` already ask for a report (``--conformance-report PATH``,
    a ``.md`` PATH puts the JSON beside it), that one is read; otherwise the
    run writes one to a temporary file.
    """
    path = _report_path(args, cwd)
    if path is not None:
        if path.exists():
            path.unlink()  # never read a report some earlier run left there
        done = run_kit(*args, cwd=cwd, env=env, timeout=timeout, python=python)
        return done, read_report(path)
    with tempfile.TemporaryDirectory(prefix="kit-report-") as tmp:
        path = Path(tmp) / "report.json"
        done = run_kit(*args, REPORT_OPTION, str(path), cwd=cwd, env=env, timeout=timeout, python=python)
        return done, read_report(path)


def statuses(report: dict[str, Any]) -> dict[str, str]:
    """check ID -> status ("passed", "failed", "crashed", "inconclusive", "xfailed", ...)."""
    return {check["id"]: check["status"] for check in report["checks"]}


def verdict(report: dict[str, Any]) -> str:
    """The run's verdict: "conforming", "not conforming" or "partial".

    Reports that predate ``verdict.status`` carry only ``verdict.conforming``.
    """
    found = report["verdict"]
    status = found.get("status")
    if status is not None:
        return str(status)
    return "conforming" if found["conforming"] else "not conforming"
