"""``--variant NAME`` runs the same tests on a broken variant (test_broken_variants.py does)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sharded_ops, beside the tests

import sharded_ops  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--variant",
        default="correct",
        help="'correct', or the name of a broken variant of the file's function (sharded_ops.BROKEN)",
    )


@pytest.fixture(scope="module")
def implementation(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """The function under test: the module-level ``FUNCTION`` name of the test file."""
    name = request.module.FUNCTION
    variant = request.config.getoption("--variant")
    if variant == "correct":
        return getattr(sharded_ops, name)
    if variant not in sharded_ops.BROKEN[name]:
        raise pytest.UsageError(f"--variant {variant}: {name} has {sorted(sharded_ops.BROKEN[name])}")
    return sharded_ops.BROKEN[name][variant]
