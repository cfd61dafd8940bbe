"""Property tests of ``row_softmax``: a float function, right within a tolerance, not bit for bit.

A softmax computed by XLA and one computed by NumPy differ in the last bits
(``exp`` and the sum round differently), so ``assert_values_equal`` would fail
a correct implementation by an ulp; ``assert_values_close`` compares within
float32's default tolerance.  The inputs are bounded: a softmax of NaN,
infinity or ``1e38`` is not what this test is about.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from conformance import strategies as cst
from conformance.assertions import assert_jit_shardings, assert_layout, assert_values_close

FUNCTION = "row_softmax"
MESHES = cst.meshes(with_axes=("batch",))  # a "batch" axis, and any others, over any devices
EXAMPLES = settings(max_examples=25, deadline=None)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, Any]:
    """A mesh, and a float32 matrix whose rows the ``"batch"`` axis divides, placed anywhere."""
    mesh = draw(MESHES)
    rows = NamedSharding(mesh, P("batch", None))
    x = draw(
        cst.sharded_arrays(
            dtype="float32",
            sharding=rows,
            placements=cst.ARRAY_PLACEMENTS,
            min_value=-30.0,
            max_value=30.0,
            allow_nan=False,
            allow_infinity=False,
        )
    )
    return mesh, x


def softmax(x: np.ndarray) -> np.ndarray:
    """The softmax of each row, computed in float64 and rounded to x's dtype."""
    wide = np.asarray(x, np.float64)
    e = np.exp(wide - wide.max(axis=-1, keepdims=True, initial=-np.inf))
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)


@EXAMPLES
@given(inputs())
def test_rows_are_a_softmax_within_float32_tolerance(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    assert_values_close(implementation(x, mesh), softmax(np.asarray(x)))  # float32: rtol = atol = 1e-6


@EXAMPLES
@given(inputs())
def test_rows_stay_split_over_batch_and_jit_is_given_the_layout(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    rows = NamedSharding(mesh, P("batch", None))
    result = assert_jit_shardings(implementation, x, mesh, in_shardings=rows, out_shardings=rows)
    assert_layout(result, rows)
