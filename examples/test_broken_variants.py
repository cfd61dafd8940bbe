"""The tests above catch the broken variants: each file is run on them in a fresh pytest process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    ("test_file", "failing", "passing"),
    [
        # Right values in the wrong layout: the layout and jit tests fail, the values test passes.
        (
            "test_scale.py",
            ["test_result_is_laid_out_over_both_axes", "test_jit_is_given_the_layout"],
            ["test_values_are_tripled_bit_for_bit"],
        ),
        # Each device's own rows only: the values are wrong where the data axis has 2+ devices.
        ("test_column_sums.py", ["test_each_column_is_summed_over_every_row"], []),
    ],
)
def test_broken_variant_is_caught(test_file: str, failing: list[str], passing: list[str]) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", test_file, "--variant", "broken", "-rA", "--hypothesis-seed=0"],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-4000:]
    for name in failing:
        assert f"FAILED {test_file}::{name}" in out, out[-4000:]
    for name in passing:
        assert f"PASSED {test_file}::{name}" in out, out[-4000:]
    assert "AssertionFailed" in out  # caught by the library's assertions, not by a crash
