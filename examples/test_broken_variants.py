"""The tests above catch the broken variants: each file is run on them in a fresh pytest process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    ("test_file", "variant", "failing", "passing"),
    [
        # Right values in the wrong layout: the layout and jit tests fail, the values test passes.
        (
            "test_scale.py",
            "cols-forgotten",
            ["test_result_is_laid_out_over_both_axes", "test_jit_is_given_the_layout"],
            ["test_values_are_tripled_bit_for_bit"],
        ),
        # Each device's own rows only: the values are wrong where the data axis has 2+ devices.
        ("test_column_sums.py", "local-rows", ["test_each_column_is_summed_over_every_row"], []),
        # Computed in bfloat16: outside float32's tolerance; the layout is right.
        (
            "test_row_softmax.py",
            "bfloat16",
            ["test_rows_are_a_softmax_within_float32_tolerance"],
            ["test_rows_stay_split_over_batch_and_jit_is_given_the_layout"],
        ),
        # No sharding given for the weights: right values and output layout, but not the jit's inputs.
        (
            "test_project.py",
            "weights-unspecified",
            ["test_jit_gets_rows_split_and_weights_replicated"],
            ["test_values_are_the_product_within_the_rounding_of_a_sum"],
        ),
        # The mean of each device's own rows: the pytree's values are wrong, its layouts right.
        (
            "test_center_columns.py",
            "local-mean",
            ["test_columns_are_centred_on_the_mean_of_every_row"],
            ["test_each_leaf_has_its_layout_and_comes_out_of_jit"],
        ),
        # eps outside the square root: off by eps / (2 sqrt(var)), caught by a bound per row.
        (
            "test_layer_norm.py",
            "eps-outside",
            ["test_each_row_is_normalised_within_its_own_bound"],
            ["test_rows_stay_split_and_the_statistics_are_laid_out_by_row"],
        ),
        # The bias on one copy of the replicated result: the copy np.asarray reads is right.
        (
            "test_matmul_bias.py",
            "bias-after-psum",
            ["test_every_copy_of_the_replicated_result_is_the_same"],
            ["test_values_are_the_product_plus_the_bias_within_the_rounding_of_a_sum"],
        ),
    ],
)
def test_broken_variant_is_caught(
    test_file: str, variant: str, failing: list[str], passing: list[str]
) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", test_file, "--variant", variant, "-rA", "--hypothesis-seed=0"],
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
