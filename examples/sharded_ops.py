"""Two sharded functions, each with a broken variant, to be tested with the kit's library.

* ``scale(x, mesh)``: an elementwise op on 2-D arrays, ``3 * x``, laid out over
  both axes of a two-axis mesh, ``P("rows", "cols")``.
* ``column_sums(x, mesh)``: ``x.sum(axis=0)`` for ``x`` split over the mesh's
  ``"data"`` axis by rows and its ``"model"`` axis by columns: every column's
  sum must reduce across the ``"data"`` axis; the result is split by ``"model"``.

``BROKEN`` holds a plausible wrong version of each: ``scale`` that forgets the
``"cols"`` axis in its output layout, ``column_sums`` summing each device's own rows only (a
``shard_map`` without the ``psum`` over ``"data"``).  ``examples/test_*.py``
catch both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
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


BROKEN = {"scale": scale_broken, "column_sums": column_sums_broken}
