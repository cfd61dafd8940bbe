"""``--variant broken`` runs the same tests on the broken variants (test_broken_variants.py does)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sharded_ops, beside the tests

import sharded_ops  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--variant", choices=["correct", "broken"], default="correct")


@pytest.fixture(scope="module")
def implementation(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """The function under test: the module-level ``FUNCTION`` name of the test file."""
    name = request.module.FUNCTION
    if request.config.getoption("--variant") == "broken":
        return sharded_ops.BROKEN[name]
    return getattr(sharded_ops, name)
