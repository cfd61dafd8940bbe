"""A row softmax over a mesh's "batch" axis, its declared contract, and broken variants.

Run the kit's every check on it::

    python -m pytest --pyargs conformance --impl examples/contracts/softmax.py:softmax \
        --contract examples/contracts/softmax.py:CONTRACT

The broken variants (each a function of this file, for ``--impl``) are bugs that plain property
tests rarely look for: ``stale_mesh`` keeps one jitted function per mesh *shape*, so after a mesh
of the same shape over other devices it returns a result laid out on the old devices;
``evicting`` keeps only the last jitted function, so a call like an earlier one compiles again;
``trusts_committed`` hands an array already committed anywhere straight to its jitted function,
which refuses one on a single device or in another memory kind; ``no_max_shift`` overflows for
large rows; ``eager`` computes outside ``jax.jit``.

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


def _softmax(x: jax.Array) -> jax.Array:
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


_jitted: dict[Any, Any] = {}


def _jit_for(key: Any, mesh: Mesh, body: Any = _softmax) -> Any:
    if key not in _jitted:
        rows = NamedSharding(mesh, ROWS)
        _jitted[key] = jax.jit(body, in_shardings=rows, out_shardings=rows)
    return _jitted[key]


def _checked(x: Any, mesh: Mesh) -> Any:
    if np.shape(x)[0] % mesh.shape["batch"]:
        raise ValueError(f"{np.shape(x)[0]} rows do not split over the batch axis of {mesh.shape['batch']}")
    return jax.device_put(x, NamedSharding(mesh, ROWS))


def softmax(x: Any, *, mesh: Mesh) -> jax.Array:
    """The softmax of each row of x, its rows split over the mesh's "batch" axis."""
    return _jit_for(("right", mesh), mesh)(_checked(x, mesh))


_by_shape: dict[Any, Mesh] = {}


def stale_mesh(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: keeps its mesh and jitted function per mesh *shape* (axis names and sizes), not per
    devices: after a mesh of the same shape over other devices, the result lies on the old ones."""
    key = tuple(mesh.shape.items())
    kept = _by_shape.setdefault(key, mesh)
    return _jit_for(("stale", key), kept)(_checked(x, kept))


_last: list[Any] = []


def evicting(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: a cache of one, by shape and dtype: the call after another recompiles."""
    key = (mesh, np.shape(x), np.asarray(x).dtype if isinstance(x, np.ndarray) else x.dtype)
    if not _last or _last[0] != key:
        rows = NamedSharding(mesh, ROWS)
        _last[:] = [key, jax.jit(lambda v: _softmax(v), in_shardings=rows, out_shardings=rows)]
    return _last[1](_checked(x, mesh))


def trusts_committed(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: moves only NumPy arrays onto the mesh; a jax.Array committed elsewhere (one device,
    another memory kind, other devices) goes to the jitted function as it is, which refuses it."""
    if isinstance(x, jax.Array):
        if x.shape[0] % mesh.shape["batch"]:
            raise ValueError(f"{x.shape[0]} rows do not split over the batch axis of {mesh.shape['batch']}")
        return _jit_for(("trusting", mesh), mesh)(x)
    return _jit_for(("trusting", mesh), mesh)(_checked(x, mesh))


def _no_shift(x: jax.Array) -> jax.Array:
    e = jnp.exp(x)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def no_max_shift(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: no max shift, so exp overflows to inf for rows above about 88 (NaN results)."""
    return _jit_for(("noshift", mesh), mesh, _no_shift)(_checked(x, mesh))


def eager(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: the right values and layout, computed op by op outside jax.jit."""
    return _softmax(_checked(x, mesh))


def _cached(kind: str) -> Any:
    def build(mesh: Mesh) -> Any:
        rows = NamedSharding(mesh, ROWS)
        return jax.jit(lambda v: _softmax(v), in_shardings=rows, out_shardings=rows)

    cache = MeshCache(kind, build)

    def variant(x: Any, *, mesh: Mesh) -> jax.Array:
        kept, jitted = cache(mesh)
        return jitted(_checked(x, kept))

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
    e = np.exp(wide - wide.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


CONTRACT = Contract(
    name="row softmax",
    # x may come from anywhere: NumPy, uncommitted, one device, other devices, another memory kind.
    arguments=[
        Argument(
            "x",
            rank=2,
            dtypes=("float32",),
            layouts=(ROWS,),
            placements=("layouts", "numpy", "uncommitted", "device", "elsewhere", "memory-kinds"),
        )
    ],
    mesh_axes=("batch",),
    out=ROWS,
    oracle=oracle,
    atol=1e-6,
    raises=ValueError,
)

# The correct function, and each broken variant with the checks that catch it (read by
# tests/mutation_score.py, which runs the kit on each of them).
CORRECT = ("softmax",)
KILLED_BY = {
    "stale_mesh": ("fn.layout",),
    "evicting": ("fn.compile-once",),
    "no_max_shift": ("fn.values",),
    "eager": ("fn.jit",),
    "trusts_committed": ("fn.values",),
    "cache_last_only": ("fn.histories",),
    "cache_two_meshes": ("fn.histories",),
    "cache_device_set": ("fn.histories",),
    "cache_flat_ids": ("fn.histories",),
    "cache_mesh_shape": ("fn.histories",),
    "cache_axis_names": ("fn.histories",),
    "cache_first_context": ("fn.histories",),
}
