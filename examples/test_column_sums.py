"""Property tests of ``column_sums``: a sum that must reduce across the mesh's data axis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from conformance import strategies as cst
from conformance.assertions import assert_jit_shardings, assert_layout, assert_values_equal

FUNCTION = "column_sums"
# Integer sums wrap the same in any order, so they can be compared bit for bit.
DTYPES = st.sampled_from(["int32", "int8", "uint32", "int16"])
EXAMPLES = settings(max_examples=25, deadline=None)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, Any]:
    mesh = draw(cst.meshes(axis_names=("data", "model")))
    rows = mesh.shape["data"] * draw(st.integers(1, 4))
    cols = mesh.shape["model"] * draw(st.integers(1, 3))
    x = draw(
        cst.sharded_arrays(
            dtype=DTYPES,
            shape=(rows, cols),
            sharding=NamedSharding(mesh, P("data", "model")),
            placements=cst.ARRAY_PLACEMENTS,
        )
    )
    return mesh, x


def summed(x: np.ndarray) -> np.ndarray:
    return x.sum(axis=0, dtype=x.dtype)  # wraps as XLA's integer sum does


@EXAMPLES
@given(inputs())
def test_each_column_is_summed_over_every_row(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    assert_values_equal(implementation(x, mesh), summed(np.asarray(x)))


@EXAMPLES
@given(inputs())
def test_sums_are_split_over_model_and_computed_by_jit(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    out = NamedSharding(mesh, P("model"))
    result = assert_jit_shardings(
        implementation, x, mesh, in_shardings=NamedSharding(mesh, P("data", "model")), out_shardings=out
    )
    assert_layout(result, out)
