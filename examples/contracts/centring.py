"""Mean-centring of a matrix's columns over a mesh's "batch" axis, its declared contract, and
broken variants.

``center(x)`` takes ``x`` committed with its rows split over the "batch" axis of some mesh
(``P("batch", None)``) and finds the mesh in ``x.sharding.mesh``: the contract says so with
``mesh="inputs"``.  It subtracts each column's mean, computed with ``jax.shard_map`` and a
``jax.lax.pmean`` over "batch", inside ``jax.jit``.  Run the kit's every check on it::

    python -m pytest --pyargs conformance --impl examples/contracts/centring.py:center \
        --contract examples/contracts/centring.py:CONTRACT

The broken variants (each a function of this file, for ``--impl``) are bugs that plain property
tests rarely look for: ``local_mean`` forgets the ``pmean``, so each shard centres its rows on
its own mean (right on a mesh whose "batch" axis has one device); ``evicting`` keeps only the
last jitted function, so a call like an earlier one compiles again after a call on another
mesh; ``donating`` donates its input to the jit, so the caller's array is deleted by the call.

The ``cache_*`` variants keep their jitted function per mesh in a cache that goes wrong in
one of the ways caches.py lists, one variant per ``caches.KINDS``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from conformance.contracts import Argument, Contract

sys.path.insert(0, str(Path(__file__).resolve().parent))  # caches.py, beside this file
from caches import MeshCache  # noqa: E402

ROWS = P("batch", None)


def _centre_block(block: jax.Array) -> jax.Array:
    # Every shard holds as many rows: the mean of the shards' means is the column's mean.
    return block - jax.lax.pmean(jnp.mean(block, axis=0, keepdims=True), "batch")


def _own_mean_block(block: jax.Array) -> jax.Array:
    return block - jnp.mean(block, axis=0, keepdims=True)


def _build(mesh: Mesh, body: Any = _centre_block, **jit_options: Any) -> Any:
    mapped = jax.shard_map(body, mesh=mesh, in_specs=ROWS, out_specs=ROWS)
    return jax.jit(mapped, out_shardings=NamedSharding(mesh, ROWS), **jit_options)


_jitted: dict[Any, Any] = {}


def _jit_for(key: Any, mesh: Mesh, body: Any = _centre_block, **jit_options: Any) -> Any:
    if key not in _jitted:
        _jitted[key] = _build(mesh, body, **jit_options)
    return _jitted[key]


def _mesh_of(x: jax.Array) -> Mesh:
    """The mesh x is laid out over (the function gets no other)."""
    sharding = x.sharding
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"x must be laid out over a mesh (a NamedSharding), not {sharding}")
    return sharding.mesh  # type: ignore[return-value]


def center(x: jax.Array) -> jax.Array:
    """``x`` minus the mean of each of its columns, rows split over its mesh's "batch" axis."""
    mesh = _mesh_of(x)
    return _jit_for(("right", mesh), mesh)(x)


def local_mean(x: jax.Array) -> jax.Array:
    """Broken: no pmean, so each shard of rows is centred on its own mean."""
    mesh = _mesh_of(x)
    return _jit_for(("local", mesh), mesh, _own_mean_block)(x)


_last: list[Any] = []


def evicting(x: jax.Array) -> jax.Array:
    """Broken: a cache of one jitted function: a call on a mesh seen before another compiles again."""
    mesh = _mesh_of(x)
    if not _last or _last[0] != mesh:
        _last[:] = [mesh, _build(mesh)]
    return _last[1](x)


def donating(x: jax.Array) -> jax.Array:
    """Broken: donates x to the jit (to save memory), which deletes the caller's array."""
    mesh = _mesh_of(x)
    return _jit_for(("donating", mesh), mesh, donate_argnums=0)(x)


def _cached(kind: str) -> Any:
    cache = MeshCache(kind, _build)

    def variant(x: jax.Array) -> jax.Array:
        kept, jitted = cache(_mesh_of(x))
        return jitted(jax.device_put(x, NamedSharding(kept, ROWS)))

    variant.__doc__ = f"Broken: its jitted function per mesh in a {kind} cache (caches.py)."
    return variant


cache_last_only = _cached("last-only")
cache_two_meshes = _cached("two-meshes")
cache_device_set = _cached("device-set")
cache_flat_ids = _cached("flat-ids")
cache_mesh_shape = _cached("mesh-shape")
cache_axis_names = _cached("axis-names")
cache_first_context = _cached("first-context")


def oracle(x: np.ndarray) -> np.ndarray:
    wide = np.asarray(x, np.float64)
    return wide - wide.mean(axis=0)


CONTRACT = Contract(
    name="column centring",
    arguments=[Argument("x", rank=2, dtypes=("float32",), layouts=(ROWS,), placements=("layouts",))],
    mesh_axes=("batch",),
    mesh="inputs",
    out=ROWS,
    oracle=oracle,
    # Values in [-100, 100] centre to values near 0: a float32 mean of them is off by a few
    # units in the last place of 100 (about 1e-5), so the bound is absolute.
    rtol=1e-6,
    atol=1e-4,
)

# The correct function, and each broken variant with the checks that catch it (read by
# tests/mutation_score.py, which runs the kit on each of them).
CORRECT = ("center",)
KILLED_BY = {
    "local_mean": ("fn.values",),
    "evicting": ("fn.compile-once",),
    "donating": ("fn.input-intact",),
    "cache_last_only": ("fn.histories",),
    "cache_two_meshes": ("fn.histories",),
    "cache_device_set": ("fn.histories",),
    "cache_flat_ids": ("fn.histories",),
    "cache_mesh_shape": ("fn.histories",),
    "cache_axis_names": ("fn.histories",),
    "cache_first_context": ("fn.histories",),
}
