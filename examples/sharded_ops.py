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
* ``layer_norm(x, mesh)``: ``{"y", "mean", "var"}`` of each row, rows split
  over ``"batch"``; its error scales with ``1 / sqrt(var + eps)``, row by row,
  so it is judged within a bound per row.
* ``matmul_bias(x, w, b, mesh)``: ``x @ w + b`` with the contracting dimension
  split over ``"model"`` (a ``shard_map`` and a ``psum``), the result
  replicated on every device: each device's copy must be the same.

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


EPS = 1e-5  # layer_norm's epsilon


@functools.cache
def _layer_norm_fn(mesh: Mesh, eps_inside: bool) -> Callable[[Any], dict[str, jax.Array]]:
    rows = NamedSharding(mesh, P("batch", None))
    per_row = NamedSharding(mesh, P("batch"))

    def norm(x: jax.Array) -> dict[str, jax.Array]:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # two passes: no cancellation
        scale = jax.numpy.sqrt(var + EPS) if eps_inside else jax.numpy.sqrt(var) + EPS
        return {"y": (x - mean) / scale, "mean": mean[:, 0], "var": var[:, 0]}

    return jax.jit(norm, in_shardings=rows, out_shardings={"y": rows, "mean": per_row, "var": per_row})


def layer_norm(x: Any, mesh: Mesh) -> dict[str, jax.Array]:
    """``{"y": (x - mean) / sqrt(var + EPS), "mean": mean, "var": var}`` of each row of ``x`` (2-D,
    float32), rows split over ``"batch"``; ``"y"`` laid out as ``x``, the statistics by row."""
    return _layer_norm_fn(mesh, True)(_placed(x, NamedSharding(mesh, P("batch", None))))


def layer_norm_eps_outside(x: Any, mesh: Mesh) -> dict[str, jax.Array]:
    """``(x - mean) / (sqrt(var) + EPS)``: EPS outside the square root, off by about
    ``EPS / (2 sqrt(var))`` relative -- inside a tolerance loose enough for the worst row."""
    return _layer_norm_fn(mesh, False)(_placed(x, NamedSharding(mesh, P("batch", None))))


@functools.cache
def _matmul_bias_fn(mesh: Mesh, bias_before_psum: bool) -> Callable[[Any, Any, Any], jax.Array]:
    def local(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
        partial = x @ w
        first = jax.lax.axis_index("model") == 0
        if bias_before_psum:  # the bias once, on the first shard, inside the sum
            return jax.lax.psum(partial + jax.numpy.where(first, b, 0), "model")
        return jax.lax.psum(partial, "model") + jax.numpy.where(first, b, 0)  # on one copy only

    body = jax.shard_map(
        local, mesh=mesh, in_specs=(P(None, "model"), P("model", None), P()), out_specs=P(), check_vma=False
    )
    split_k = NamedSharding(mesh, P(None, "model")), NamedSharding(mesh, P("model", None))
    everywhere = NamedSharding(mesh, P())
    return jax.jit(body, in_shardings=(*split_k, everywhere), out_shardings=everywhere)


def _matmul_placed(x: Any, w: Any, b: Any, mesh: Mesh) -> tuple[Any, Any, Any]:
    return (
        _placed(x, NamedSharding(mesh, P(None, "model"))),
        _placed(w, NamedSharding(mesh, P("model", None))),
        _placed(b, NamedSharding(mesh, P())),
    )


def matmul_bias(x: Any, w: Any, b: Any, mesh: Mesh) -> jax.Array:
    """``x @ w + b``: ``x`` split by columns and ``w`` by rows over ``"model"`` (the contracting
    dimension), reduced with a ``psum``; the result and ``b`` replicated on every device."""
    return _matmul_bias_fn(mesh, True)(*_matmul_placed(x, w, b, mesh))


def matmul_bias_after_psum(x: Any, w: Any, b: Any, mesh: Mesh) -> jax.Array:
    """Adds the bias on the first ``"model"`` shard after the ``psum``, not before: only that
    copy of the "replicated" result has it (``check_vma=False`` lets it through), and that is
    the copy ``np.asarray`` reads."""
    return _matmul_bias_fn(mesh, False)(*_matmul_placed(x, w, b, mesh))


# The broken variants, by function and name (``--variant NAME`` in examples/conftest.py).
BROKEN: dict[str, dict[str, Callable[..., Any]]] = {
    "scale": {"cols-forgotten": scale_broken},
    "column_sums": {"local-rows": column_sums_broken},
    "row_softmax": {"bfloat16": row_softmax_in_bfloat16},
    "project": {"weights-unspecified": project_weights_unspecified},
    "center_columns": {"local-mean": center_columns_local_mean},
    "layer_norm": {"eps-outside": layer_norm_eps_outside},
    "matmul_bias": {"bias-after-psum": matmul_bias_after_psum},
}
