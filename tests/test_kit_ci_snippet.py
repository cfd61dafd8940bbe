"""The README's Gating CI workflow runs as written.

The file is validated against GitHub's workflow schema (``check-jsonschema``'s
built-in copy), then its ``run:`` commands run in order, in a real shell, from a
user's project: as GitHub runs them, a failed step stops the job but for the
``if: always()`` ones.  The install line (``pip install ./pjit-double-conformance .``)
is left to ``.ci/matrix.py``, whose oldest set runs it in a fresh venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.kit_process import child_env

RAISES = "def pjit_double(x, *, mesh=None):\n    raise RuntimeError('not written yet')\n"
NO_ATTRIBUTE = "def something_else(x):\n    return x\n"


def workflow_text() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index("```yaml\n# .github/workflows/conformance.yml")
    return text[start:].split("\n", 1)[1].split("```", 1)[0]


def test_the_workflow_is_valid_for_github(tmp_path: Path) -> None:
    path = tmp_path / ".github" / "workflows" / "conformance.yml"
    path.parent.mkdir(parents=True)
    path.write_text(workflow_text())
    tool = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    done = subprocess.run(
        [tool, "--builtin-schema", "vendor.github-workflows", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workflow = yaml.safe_load(workflow_text())
    assert workflow[True] or workflow.get("on"), workflow  # YAML 1.1 reads the key `on` as True


def _run_job(project: Path) -> tuple[list[int], str]:
    """Run the job's ``run:`` steps in ``project``; the statuses, and the job summary."""
    steps = yaml.safe_load(workflow_text())["jobs"]["conformance"]["steps"]
    summary = project / "summary.md"
    env = child_env(project, GITHUB_STEP_SUMMARY=str(summary), PYTHONDONTWRITEBYTECODE="1")
    statuses: list[int] = []
    failed = False
    for step in steps:
        command = step.get("run")
        if command is None or command.startswith("pip install"):
            continue
        if failed and step.get("if") != "always()":
            continue
        done = subprocess.run(
            ["bash", "-e", "-c", command], cwd=project, env=env, capture_output=True, text=True, timeout=300
        )
        statuses.append(done.returncode)
        failed = failed or done.returncode != 0
    return statuses, summary.read_text() if summary.exists() else ""


@pytest.mark.parametrize(
    ("source", "run_status", "shown"),
    [
        (RAISES, 1, ["NOT CONFORMING", "Failure of `call.smoke`", "RuntimeError: not written yet", "rerun:"]),
        (NO_ATTRIBUTE, 4, ["USAGE ERROR (exit 4)", "mypkg has no attribute 'pjit_double'"]),
    ],
    ids=["failing-implementation", "usage-error"],
)
def test_the_workflows_commands_run_and_leave_a_summary(
    tmp_path: Path, source: str, run_status: int, shown: list[str]
) -> None:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text(source)
    statuses, summary = _run_job(tmp_path)
    # touch, the suite, the summary step (which runs whatever came before it, and succeeds)
    assert statuses == [0, run_status, 0], (statuses, summary)
    for text in shown:
        assert text in summary, summary
    assert not (tmp_path / ".pytest_cache").exists() and not (tmp_path / ".hypothesis").exists()
    left = [
        name for name in os.listdir(tmp_path) if name != ".benchmarks"
    ]  # pytest-benchmark's, if installed
    assert sorted(left) == sorted(
        ["mypkg", "conformance-xfail.txt", "conformance.md", "summary.md"]
        + (["conformance.json"] if run_status != 4 else [])
    )
