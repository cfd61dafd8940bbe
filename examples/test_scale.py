"""Property tests of ``scale``: an elementwise op on 2-D arrays over a two-axis mesh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from conformance import strategies as cst
from conformance.assertions import (
    assert_compiles_once,
    assert_input_intact,
    assert_jit_shardings,
    assert_layout,
    assert_values_equal,
    flush_subnormals,
)

FUNCTION = "scale"
MESHES = cst.meshes(axis_names=("rows", "cols"))  # any two-axis mesh over any devices, in any order
DTYPES = st.sampled_from(["float32", "bfloat16", "float16", "int8", "int32", "uint16", "complex64"])
EXAMPLES = settings(max_examples=25, deadline=None)


def tripled(x: np.ndarray) -> np.ndarray:
    """What ``3 * x`` is in x's own dtype (integers wrap)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.multiply(x, x.dtype.type(3), dtype=x.dtype)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, Any]:
    """A mesh, and an array whose shape the mesh divides, placed anywhere (NumPy, one device, sharded)."""
    mesh = draw(MESHES)
    rows = mesh.shape["rows"] * draw(st.integers(0, 3))
    cols = mesh.shape["cols"] * draw(st.integers(1, 3))
    layout = cst.shardings(mesh=mesh, shape=(rows, cols))  # the input may come in any layout that fits
    x = draw(
        cst.sharded_arrays(dtype=DTYPES, shape=(rows, cols), sharding=layout, placements=cst.ARRAY_PLACEMENTS)
    )
    return mesh, x


@EXAMPLES
@given(inputs())
def test_values_are_tripled_bit_for_bit(implementation: Callable[..., Any], drawn: tuple[Any, Any]) -> None:
    mesh, x = drawn
    host = np.asarray(x)
    # XLA on CPU flushes subnormal inputs: 3 * (a flushed input) is right too.
    assert_values_equal(
        implementation(x, mesh), tripled(host), alternatives=[tripled(flush_subnormals(host))]
    )


@EXAMPLES
@given(inputs())
def test_result_is_laid_out_over_both_axes(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    assert_layout(implementation(x, mesh), NamedSharding(mesh, P("rows", "cols")))


@EXAMPLES
@given(inputs())
def test_jit_is_given_the_layout(implementation: Callable[..., Any], drawn: tuple[Any, Any]) -> None:
    mesh, x = drawn
    target = NamedSharding(mesh, P("rows", "cols"))
    assert_jit_shardings(implementation, x, mesh, in_shardings=target, out_shardings=target)


@EXAMPLES
@given(inputs())
def test_second_call_compiles_nothing_and_input_is_intact(
    implementation: Callable[..., Any], drawn: tuple[Any, Any]
) -> None:
    mesh, x = drawn
    before = np.array(x)
    assert_compiles_once(implementation, x, mesh)
    assert_input_intact(before, x)
