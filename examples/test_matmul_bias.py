"""Property tests of ``matmul_bias``: ``x @ w + b`` with the contracting dimension split, the
result replicated.

A replicated result has one copy per device, and ``np.asarray`` (so every
value assertion) reads one of them.  A ``shard_map`` run with
``check_vma=False`` lets copies differ; ``assert_replicas_agree`` compares
them all, bit for bit.
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
from conformance.assertions import assert_jit_shardings, assert_replicas_agree, assert_values_close

FUNCTION = "matmul_bias"
MESHES = cst.meshes(with_axes=("model",))
EXAMPLES = settings(max_examples=25, deadline=None)


def _floats(draw: st.DrawFn, shape: tuple[int, ...], sharding: NamedSharding) -> Any:
    return draw(
        cst.sharded_arrays(
            dtype="float32",
            shape=shape,
            sharding=sharding,
            placements=cst.ARRAY_PLACEMENTS,
            min_value=-1.0,
            max_value=1.0,
            allow_nan=False,
            allow_infinity=False,
        )
    )


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, Any, Any, Any]:
    """A mesh with a ``"model"`` axis; ``x`` (n, k), ``w`` (k, m) with ``k`` a multiple of the axis,
    and ``b`` (m,), each placed anywhere."""
    mesh = draw(MESHES)
    k = mesh.shape["model"] * draw(st.integers(1, 3))
    n, m = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    x = _floats(draw, (n, k), NamedSharding(mesh, P(None, "model")))
    w = _floats(draw, (k, m), NamedSharding(mesh, P("model", None)))
    b = _floats(draw, (m,), NamedSharding(mesh, P()))
    return mesh, x, w, b


def _expected(x: Any, w: Any, b: Any) -> np.ndarray:
    return (np.asarray(x, np.float64) @ np.asarray(w, np.float64) + np.asarray(b, np.float64)).astype(
        np.float32
    )


@EXAMPLES
@given(inputs())
def test_values_are_the_product_plus_the_bias_within_the_rounding_of_a_sum(
    implementation: Callable[..., Any], drawn: tuple[Any, Any, Any, Any]
) -> None:
    mesh, x, w, b = drawn
    k = x.shape[1]  # a sum of k products and a bias, each at most 1 in size
    atol = (k + 1) * float(np.finfo(np.float32).eps)
    assert_values_close(implementation(x, w, b, mesh), _expected(x, w, b), atol=atol)


@EXAMPLES
@given(inputs())
def test_every_copy_of_the_replicated_result_is_the_same(
    implementation: Callable[..., Any], drawn: tuple[Any, Any, Any, Any]
) -> None:
    mesh, x, w, b = drawn
    split_k = [NamedSharding(mesh, P(None, "model")), NamedSharding(mesh, P("model", None))]
    everywhere = NamedSharding(mesh, P())
    result = assert_jit_shardings(
        implementation, x, w, b, mesh, in_shardings=[*split_k, everywhere], out_shardings=everywhere
    )
    assert_replicas_agree(result, what="result")
