"""Property tests of ``layer_norm``: a pytree of three leaves, each judged within its own tolerance.

A float32 layer norm's error in ``y`` scales with ``1 / sqrt(var + eps)``, row
by row: a row with a large offset and a tiny spread loses digits in
``x - mean``.  One scalar tolerance loose enough for the worst row lets a
wrong formula through in every other row ("eps outside the sqrt" is off by
about ``eps / (2 sqrt(var))``).  So ``atol`` is a pytree: for ``"y"`` an
array of shape ``(rows, 1)``, a bound per row; for the statistics a number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from conformance import strategies as cst
from conformance.assertions import assert_jit_shardings, assert_layout, assert_values_close

FUNCTION = "layer_norm"
MESHES = cst.meshes(with_axes=("batch",))
EXAMPLES = settings(max_examples=25, deadline=None)
EPS = 1e-5
ULP = float(np.finfo(np.float32).eps)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, Any]:
    """A mesh, and a float32 matrix of at least 4 columns whose rows ``"batch"`` divides, on a grid
    of 2**-16 (no values so tiny that squaring them underflows), each row shifted by its own
    offset (up to 1000), placed anywhere."""
    mesh = draw(MESHES)
    rows = NamedSharding(mesh, P("batch", None))
    shape = draw(cst.shapes(sharding=rows, min_side=1, max_side=8).filter(lambda s: s[1] >= 4))
    x = draw(
        cst.sharded_arrays(
            dtype="float32",
            shape=shape,
            sharding=rows,
            placements=cst.ARRAY_PLACEMENTS,
            min_value=-1.0,
            max_value=1.0,
            allow_nan=False,
            allow_infinity=False,
        )
    )
    offsets = draw(st.lists(st.sampled_from([0.0, 10.0, 1000.0]), min_size=shape[0], max_size=shape[0]))
    grid = np.round(np.asarray(x) * 2**16) / 2**16
    shifted = (grid + np.asarray(offsets, np.float32)[:, None]).astype(np.float32)
    if isinstance(x, jax.Array):  # placed as x was
        return mesh, jax.device_put(shifted, x.sharding) if x.committed else jnp.asarray(shifted)
    return mesh, shifted


def layer_norm(x: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The statistics and ``y`` in float64, rounded to float32; and the tolerance of a float32
    computation: for ``y`` a bound per row, ``64 ulp * max|x| / sqrt(var + eps)``."""
    wide = np.asarray(x).astype(np.float64)
    mean, var = wide.mean(-1, keepdims=True), wide.var(-1, keepdims=True)
    want = {
        "y": ((wide - mean) / np.sqrt(var + EPS)).astype(np.float32),
        "mean": mean[:, 0].astype(np.float32),
        "var": var[:, 0].astype(np.float32),
    }
    size = np.abs(wide).max(-1, keepdims=True)
    atol = {
        "y": 64 * ULP * size / np.sqrt(var + EPS),  # shape (rows, 1): one bound per row
        "mean": 64 * ULP * size[:, 0],
        "var": 64 * ULP * size[:, 0] ** 2,
    }
    return want, atol


@EXAMPLES
@given(inputs())
def test_each_row_is_normalised_within_its_own_bound(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    want, atol = layer_norm(x)
    assert_values_close(implementation(x, mesh), want, rtol=0, atol=atol)


@EXAMPLES
@given(inputs())
def test_rows_stay_split_and_the_statistics_are_laid_out_by_row(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    rows, by_row = NamedSharding(mesh, P("batch", None)), NamedSharding(mesh, P("batch"))
    layout = {"y": rows, "mean": by_row, "var": by_row}
    result = assert_jit_shardings(implementation, x, mesh, in_shardings=rows, out_shardings=layout)
    assert_layout(result, layout)
