"""Sharded functions of the kinds a JAX user writes, each with broken variants, to be tested
with the kit's library alone (``examples/test_*.py``).

Bit for bit (``assert_values_equal``):

* ``scale(x, mesh)``: an elementwise op on 2-D arrays, ``3 * x``, laid out over
  both axes of a two-axis mesh, ``P("rows", "cols")``.
* ``column_sums(x, mesh)``: integer ``x.sum(axis=0)`` for ``x`` split over the
  mesh's ``"data"`` axis by rows and its ``"model"`` axis by columns: every
  column's sum must reduce across the ``"data"`` axis; the result is split by
  ``"model"``.

Floats, within a tolerance (``assert_values_close``), over a mesh that has a
``"batch"`` axis (or ``"data"``) among any others:

* ``row_softmax(x, mesh)``: a softmax of each row, rows split over ``"batch"``.
* ``project(x, w, mesh)``: ``x @ w``, ``x`` split by rows over ``"batch"``,
  the weights ``w`` replicated on every device.
* ``center_columns(x, mesh)``: a ``shard_map`` that subtracts each column's
  mean, which must reduce across ``"data"`` (``psum``); it returns a pytree,
  ``{"centred": ..., "mean": ...}``, each leaf in its own layout.

``BROKEN[name]`` holds plausible wrong versions of each, by variant name;
``examples/test_broken_variants.py`` runs each test file on them and shows
which tests catch which.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


@functools.cache
def _scale_fn(mesh: Mesh, out_spec: P) -> Callable[[Any], jax.Array]:
    # One jitted function per mesh, kept: a second call compiles nothing.
    return jax.jit(
        lambda x: x * 3,
        in_shardings=NamedSharding(mesh, P("rows", "cols")),
        out_shardings=NamedSharding(mesh, out_spec),
    )


def _placed(x: Any, sharding: NamedSharding) -> Any:
    # jit refuses an array committed to other devices than its in_shardings: move it first.
    return jax.device_put(x, sharding) if isinstance(x, jax.Array) and x.committed else x


def scale(x: Any, mesh: Mesh) -> jax.Array:
    """``3 * x`` in ``x``'s dtype, laid out as ``NamedSharding(mesh, P("rows", "cols"))``."""
    return _scale_fn(mesh, P("rows", "cols"))(_placed(x, NamedSharding(mesh, P("rows", "cols"))))


def scale_broken(x: Any, mesh: Mesh) -> jax.Array:
    """Right values, wrong layout: the output is split by rows only, replicated over "cols"."""
    return _scale_fn(mesh, P("rows"))(_placed(x, NamedSharding(mesh, P("rows", "cols"))))


@functools.cache
def _column_sums_fn(mesh: Mesh, reduce: bool) -> Callable[[Any], jax.Array]:
    def local(block: jax.Array) -> jax.Array:
        partial = block.sum(axis=0, dtype=block.dtype)  # int8 sums stay int8, as NumPy's do
        return jax.lax.psum(partial, "data") if reduce else partial

    summed = jax.shard_map(
        local, mesh=mesh, in_specs=P("data", "model"), out_specs=P("model"), check_vma=False
    )
    return jax.jit(
        summed,
        in_shardings=NamedSharding(mesh, P("data", "model")),
        out_shardings=NamedSharding(mesh, P("model")),
    )


def column_sums(x: Any, mesh: Mesh) -> jax.Array:
    """``x.sum(axis=0)`` in ``x``'s dtype, reduced across ``"data"``, laid out as ``P("model")``."""
    return _column_sums_fn(mesh, True)(_placed(x, NamedSharding(mesh, P("data", "model"))))


def column_sums_broken(x: Any, mesh: Mesh) -> jax.Array:
    """Sums each device's own rows only: the ``psum`` over ``"data"`` is missing."""
    return _column_sums_fn(mesh, False)(_placed(x, NamedSharding(mesh, P("data", "model"))))


# ---------------------------------------------------------------------------
# Floats over a mesh with a "batch" axis: a softmax, a projection, a centring


@functools.cache
def _row_softmax_fn(mesh: Mesh, compute_dtype: str | None) -> Callable[[Any], jax.Array]:
    rows = NamedSharding(mesh, P("batch", None))

    def softmax(x: jax.Array) -> jax.Array:
        z = x if compute_dtype is None else x.astype(compute_dtype)
        return jax.nn.softmax(z, axis=-1).astype(x.dtype)

    return jax.jit(softmax, in_shardings=rows, out_shardings=rows)


def row_softmax(x: Any, mesh: Mesh) -> jax.Array:
    """The softmax of each row of ``x`` (2-D), rows split over ``"batch"``, laid out the same."""
    return _row_softmax_fn(mesh, None)(_placed(x, NamedSharding(mesh, P("batch", None))))


def row_softmax_in_bfloat16(x: Any, mesh: Mesh) -> jax.Array:
    """Computes in bfloat16 "for speed": right to about 3 significant digits, not to float32's 7."""
    return _row_softmax_fn(mesh, "bfloat16")(_placed(x, NamedSharding(mesh, P("batch", None))))


@functools.cache
def _project_fn(mesh: Mesh, weights: P | None) -> Callable[[Any, Any], jax.Array]:
    rows = NamedSharding(mesh, P("batch", None))
    return jax.jit(
        lambda x, w: x @ w,
        in_shardings=(rows, None if weights is None else NamedSharding(mesh, weights)),
        out_shardings=rows,
    )


def project(x: Any, w: Any, mesh: Mesh) -> jax.Array:
    """``x @ w``: ``x`` split by rows over ``"batch"``, ``w`` replicated, the result split as ``x``."""
    placed = _placed(x, NamedSharding(mesh, P("batch", None))), _placed(w, NamedSharding(mesh, P()))
    return _project_fn(mesh, P())(*placed)


def project_weights_unspecified(x: Any, w: Any, mesh: Mesh) -> jax.Array:
    """No sharding for the weights: right values and output layout, but jit was not told to
    replicate ``w`` (it places the host copy as it likes, and may change its mind)."""
    return _project_fn(mesh, None)(_placed(x, NamedSharding(mesh, P("batch", None))), np.asarray(w))


@functools.cache
def _center_fn(mesh: Mesh, reduce: bool) -> Callable[[Any], dict[str, jax.Array]]:
    data = mesh.shape["data"]

    def local(block: jax.Array) -> dict[str, jax.Array]:
        total = block.sum(axis=0)
        if reduce:
            total = jax.lax.psum(total, "data")
        mean = total / (block.shape[0] * (data if reduce else 1))
        return {"centred": block - mean, "mean": mean}

    centred = NamedSharding(mesh, P("data", None))
    everywhere = NamedSharding(mesh, P())
    body = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=P("data", None),
        out_specs={"centred": P("data", None), "mean": P()},
        check_vma=False,
    )
    return jax.jit(body, in_shardings=centred, out_shardings={"centred": centred, "mean": everywhere})


def center_columns(x: Any, mesh: Mesh) -> dict[str, jax.Array]:
    """``{"centred": x - mean, "mean": mean}`` with ``mean = x.mean(axis=0)``: ``x`` (2-D) split by
    rows over ``"data"``; ``"centred"`` laid out as ``x``, ``"mean"`` replicated."""
    return _center_fn(mesh, True)(_placed(x, NamedSharding(mesh, P("data", None))))


def center_columns_local_mean(x: Any, mesh: Mesh) -> dict[str, jax.Array]:
    """Each device subtracts the mean of its own rows: the ``psum`` over ``"data"`` is missing."""
    return _center_fn(mesh, False)(_placed(x, NamedSharding(mesh, P("data", None))))


# The broken variants, by function and name (``--variant NAME`` in examples/conftest.py).
BROKEN: dict[str, dict[str, Callable[..., Any]]] = {
    "scale": {"cols-forgotten": scale_broken},
    "column_sums": {"local-rows": column_sums_broken},
    "row_softmax": {"bfloat16": row_softmax_in_bfloat16},
    "project": {"weights-unspecified": project_weights_unspecified},
    "center_columns": {"local-mean": center_columns_local_mean},
}
