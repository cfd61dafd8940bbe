"""Property tests of ``center_columns``: a ``shard_map`` whose result is a pytree.

``{"centred": x - mean, "mean": mean}``: the assertions take the whole dict,
compare it leaf by leaf, and name the failing leaf (``result['mean']``).
Each column's mean is a sum over every row, so it is compared within the
rounding of a sum of that many values.
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

FUNCTION = "center_columns"
MESHES = cst.meshes(with_axes=("data",))
EXAMPLES = settings(max_examples=25, deadline=None)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, Any]:
    mesh = draw(MESHES)
    rows = NamedSharding(mesh, P("data", None))
    x = draw(
        cst.sharded_arrays(
            dtype="float32",
            shape=cst.shapes(sharding=rows, min_side=1, max_side=32),
            sharding=rows,
            placements=cst.ARRAY_PLACEMENTS,
            min_value=-100.0,
            max_value=100.0,
            allow_nan=False,
            allow_infinity=False,
        )
    )
    return mesh, x


def centred(x: np.ndarray) -> dict[str, np.ndarray]:
    wide = np.asarray(x, np.float64)
    mean = wide.mean(axis=0)
    return {"centred": (wide - mean).astype(x.dtype), "mean": mean.astype(x.dtype)}


@EXAMPLES
@given(inputs())
def test_columns_are_centred_on_the_mean_of_every_row(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    # A mean of n values of at most 100: its rounding is within n ulps of 100.
    atol = x.shape[0] * 100 * float(np.finfo(np.float32).eps)
    assert_values_close(implementation(x, mesh), centred(np.asarray(x)), atol=atol)


@EXAMPLES
@given(inputs())
def test_each_leaf_has_its_layout_and_comes_out_of_jit(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    rows, everywhere = NamedSharding(mesh, P("data", None)), NamedSharding(mesh, P())
    layouts = {"centred": rows, "mean": everywhere}
    result = assert_jit_shardings(implementation, x, mesh, in_shardings=rows, out_shardings=layouts)
    assert_layout(result, layouts)
