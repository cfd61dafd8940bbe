"""The gate checks name the real cause: ``api.mesh-keyword`` blames ``mesh`` only when the same call
without it goes through, and a gate stands behind the gates before it.

Each run is a real ``python -m pytest conformance`` process (started in the background by
conftest.py), on an implementation that raises.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.kit_process import REPORT_OPTION

GATES = ["--check", "call.smoke", "--check", "api.mesh-keyword"]

RAISES_INTERRUPT = """
def pjit_double(x, *, mesh=None):
    raise KeyboardInterrupt
"""
RAISES_ALWAYS = """
def pjit_double(x, *, mesh=None):
    raise RuntimeError("the backend is gone")
"""
# Doubles once, then raises on every later call, with the mesh keyword or without it.
RAISES_AFTER_ONE = """
import jax

_calls = []


def pjit_double(x, *, mesh=None):
    _calls.append(1)
    if len(_calls) > 1:
        raise RuntimeError("a second call is not supported")
    return jax.jit(lambda v: v + v)(x)
"""
NO_MESH_KEYWORD = """
import jax


def pjit_double(x):
    return jax.jit(lambda v: v + v)(x)
"""


def _run(key: str, source: str) -> Any:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "conformance",
        "-p",
        "no:cacheprovider",
        "--impl",
        f"{{tmp}}/{key}.py:pjit_double",
        *GATES,
        REPORT_OPTION,
        f"{{tmp}}/{key}.json",
    ]
    return pytest.mark.background(f"gates-{key}", argv, files={f"{key}.py": source})


def _report(background: Any, key: str) -> dict[str, Any]:
    import json

    return json.loads((background.tmp / f"{key}.json").read_text())


def _check(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["id"] == check_id)


@pytest.mark.parametrize(
    ("key", "raised"),
    [
        pytest.param(
            "kit_gate_interrupt", "KeyboardInterrupt", marks=_run("kit_gate_interrupt", RAISES_INTERRUPT)
        ),
        pytest.param(
            "kit_gate_always",
            "RuntimeError: the backend is gone",
            marks=_run("kit_gate_always", RAISES_ALWAYS),
        ),
    ],
)
def test_an_implementation_that_always_raises_is_not_told_mesh_is_unsupported(
    bg_run: Any, background: Any, key: str, raised: str
) -> None:
    assert bg_run.returncode == 1, bg_run
    report = _report(background, key)
    smoke, keyword = _check(report, "call.smoke"), _check(report, "api.mesh-keyword")
    assert smoke["status"] == "failed" and raised in smoke["message"], smoke
    assert keyword["status"] == "not run", keyword
    assert keyword["message"] == "not run: gate check call.smoke failed", keyword
    assert "`mesh` is not supported" not in bg_run.stdout, bg_run


@_run("kit_gate_after_one", RAISES_AFTER_ONE)
def test_a_call_that_raises_with_and_without_mesh_blames_neither_keyword(
    bg_run: Any, background: Any
) -> None:
    assert bg_run.returncode == 1, bg_run
    keyword = _check(_report(background, "kit_gate_after_one"), "api.mesh-keyword")
    assert keyword["status"] == "failed", keyword
    assert "pjit_double raised with the mesh keyword and without it" in keyword["message"], keyword
    assert "the failure is not about `mesh`" in keyword["message"], keyword
    assert "`mesh` is not supported" not in keyword["message"], keyword


@_run("kit_gate_no_keyword", NO_MESH_KEYWORD)
def test_an_implementation_without_the_keyword_is_still_told_so(bg_run: Any, background: Any) -> None:
    assert bg_run.returncode == 1, bg_run
    report = _report(background, "kit_gate_no_keyword")
    assert _check(report, "call.smoke")["status"] == "passed"
    keyword = _check(report, "api.mesh-keyword")
    assert keyword["status"] == "failed" and "`mesh` is not supported" in keyword["message"], keyword
