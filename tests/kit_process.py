"""Running the kit as a user does: ``python -m pytest conformance ...`` in a real process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_kit(
    *args: str,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    """Run pytest on the conformance suite; ``CI`` is dropped so the default profile applies."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS", "CONFORMANCE_IMPL")}
    full_env.update(env or {})
    return subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-v", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def outcomes(output: str) -> dict[str, str]:
    """check ID -> PASSED/FAILED/SKIPPED/XFAIL/XPASS/ERROR, from pytest's -v lines.

    Plain runs print ``...::test_check[ID] PASSED``; pytest-xdist prints
    ``[gw0] [ 50%] PASSED ...::test_check[ID]``.
    """
    words = "PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR"
    found = {}
    for check_id, word in re.findall(rf"test_check\[([^\]]+)\] ({words})\b", output):
        found[check_id] = word
    for word, check_id in re.findall(rf"\] ({words}) \S*test_check\[([^\]]+)\]", output):
        found[check_id] = word
    return found
