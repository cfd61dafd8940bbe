"""Property tests of ``project``: ``x @ w`` with ``x`` split by rows and the weights replicated.

Two inputs that must agree (``w`` has as many rows as ``x`` has columns), each
placed anywhere; a float32 sum of ``k`` products is compared within ``k``
ulps of the largest product (``atol``), as a sum's rounding grows with its
length.
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

FUNCTION = "project"
MESHES = cst.meshes(with_axes=("batch",))
EXAMPLES = settings(max_examples=25, deadline=None)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, Any, Any]:
    """A mesh, ``x`` split by rows over ``"batch"``, and ``w`` of ``x``'s width, each placed anywhere."""
    mesh = draw(MESHES)
    x = draw(
        cst.sharded_arrays(
            dtype="float32",
            sharding=NamedSharding(mesh, P("batch", None)),
            placements=cst.ARRAY_PLACEMENTS,
            min_value=-1.0,
            max_value=1.0,
            allow_nan=False,
            allow_infinity=False,
        )
    )
    w = draw(
        cst.sharded_arrays(
            dtype="float32",
            shape=(x.shape[1], draw(st.integers(1, 5))),
            sharding=NamedSharding(mesh, P()),
            placements=cst.ARRAY_PLACEMENTS,
            min_value=-1.0,
            max_value=1.0,
            allow_nan=False,
            allow_infinity=False,
        )
    )
    return mesh, x, w


@EXAMPLES
@given(inputs())
def test_values_are_the_product_within_the_rounding_of_a_sum(
    implementation: Callable[..., Any], drawn: tuple[Any, Any, Any]
) -> None:
    mesh, x, w = drawn
    expected = (np.asarray(x, np.float64) @ np.asarray(w, np.float64)).astype(np.float32)
    k = x.shape[1]  # a sum of k products, each at most 1 in size
    assert_values_close(
        implementation(x, w, mesh), expected, atol=max(k, 1) * float(np.finfo(np.float32).eps)
    )


@EXAMPLES
@given(inputs())
def test_jit_gets_rows_split_and_weights_replicated(
    implementation: Callable[..., Any], drawn: tuple[Any, Any, Any]
) -> None:
    mesh, x, w = drawn
    rows, everywhere = NamedSharding(mesh, P("batch", None)), NamedSharding(mesh, P())
    result = assert_jit_shardings(
        implementation, x, w, mesh, in_shardings=[rows, everywhere], out_shardings=rows
    )
    assert_layout(result, rows)
