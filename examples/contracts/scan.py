"""A cumulative sum down a sequence split over a mesh's "seq" axis, declared with no NumPy oracle:
the function itself, on one device, is the reference (``oracle=ITSELF``).

``cumsum(x, mesh=mesh)`` takes ``x`` of shape ``(rows, features)`` with its rows split over the
"seq" axis (``P("seq", None)``) and returns the running sum down the rows, laid out the same way.
Inside ``jax.jit`` and ``jax.shard_map``, each shard sums its own rows, then adds the totals of
the shards before it (an ``all_gather`` of the shards' totals over "seq", masked by
``axis_index``).  Run the kit's every check on it::

    python -m pytest --pyargs conformance --impl examples/contracts/scan.py:cumsum \
        --contract examples/contracts/scan.py:CONTRACT

No oracle is written: on a mesh of one device each collective is trivial, so the function's own
result there is the reference every other mesh and layout must give, within a bound that the
tolerance function computes from the inputs (the rounding of any order of summation).  The broken
variants differ between meshes, as a sharded function's bugs do: ``no_carry`` forgets the other
shards' totals, ``carry_all`` adds every other shard's total (a ``psum`` where a prefix belongs),
``carry_reversed`` adds the totals of the shards after it, ``wrong_axis`` gathers over the mesh's
last axis, which is "seq" only when no other axis follows it, and each ``cache_*`` variant keeps its
jitted function per mesh in a cache that goes wrong in one of the ways caches.py lists (one per
``caches.KINDS``): ``cache_mesh_shape``, keyed on the mesh's shape, gives a result laid out for an
earlier mesh; ``cache_last_only`` compiles again for a mesh it has seen.  What
this form cannot catch: a bug that gives the same wrong result on every mesh, one device included
(a wrong formula); a NumPy oracle catches that.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from conformance.contracts import ITSELF, Argument, Contract

sys.path.insert(0, str(Path(__file__).resolve().parent))  # caches.py, beside this file
from caches import MeshCache  # noqa: E402

SEQ = P("seq", None)


def _before(totals: jax.Array, k: jax.Array, *, after: bool = False) -> jax.Array:
    """The sum of the totals of the shards before shard ``k`` (``after``: after it)."""
    index = jnp.arange(totals.shape[0])[:, None]
    chosen = index > k if after else index < k
    return jnp.where(chosen, totals, 0).sum(axis=0, keepdims=True)


def _scan_block(block: jax.Array, *, axis: str = "seq", carry: str = "before") -> jax.Array:
    local = jnp.cumsum(block, axis=0)
    if carry == "none":
        return local
    total = local[-1:]
    if carry == "all":  # every other shard's total
        return local + jax.lax.psum(total, axis) - total
    totals = jax.lax.all_gather(total, axis, tiled=True)
    return local + _before(totals, jax.lax.axis_index(axis), after=carry == "after")


def _build(mesh: Mesh, axis: str = "seq", carry: str = "before") -> Any:
    rows = NamedSharding(mesh, SEQ)
    body = partial(_scan_block, axis=axis, carry=carry)
    mapped = jax.shard_map(body, mesh=mesh, in_specs=SEQ, out_specs=SEQ, check_vma=False)
    return jax.jit(mapped, in_shardings=rows, out_shardings=rows)


_jitted: dict[Any, Any] = {}


def _run(x: Any, mesh: Mesh, **how: str) -> jax.Array:
    key = (mesh, tuple(sorted(how.items())))
    if key not in _jitted:
        _jitted[key] = _build(mesh, **how)
    return _jitted[key](x)


def cumsum(x: Any, *, mesh: Mesh) -> jax.Array:
    """The running sum of ``x`` down its rows, rows split over the mesh's "seq" axis."""
    return _run(x, mesh)


def no_carry(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: each shard sums its own rows only (right on one device)."""
    return _run(x, mesh, carry="none")


def carry_all(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: adds the total of every other shard, later ones too (a psum where a prefix belongs)."""
    return _run(x, mesh, carry="all")


def carry_reversed(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: adds the totals of the shards after it."""
    return _run(x, mesh, carry="after")


def wrong_axis(x: Any, *, mesh: Mesh) -> jax.Array:
    """Broken: takes the mesh's last axis for the sequence's ("seq" only where no axis follows it)."""
    return _run(x, mesh, axis=mesh.axis_names[-1])


def _cached(kind: str) -> Any:
    cache = MeshCache(kind, _build)

    def variant(x: Any, *, mesh: Mesh) -> jax.Array:
        kept, jitted = cache(mesh)
        return jitted(jax.device_put(x, NamedSharding(kept, SEQ)) if isinstance(x, jax.Array) else x)

    variant.__doc__ = f"Broken: its jitted function per mesh in a {kind} cache (caches.py)."
    return variant


cache_last_only = _cached("last-only")
cache_two_meshes = _cached("two-meshes")
cache_device_set = _cached("device-set")
cache_flat_ids = _cached("flat-ids")
cache_mesh_shape = _cached("mesh-shape")
cache_axis_names = _cached("axis-names")
cache_first_context = _cached("first-context")


def rounding(x: np.ndarray) -> np.ndarray:
    """The bound of any order of summation: (rows) float32 ulps of each column's sum of |x|."""
    return x.shape[0] * np.finfo(np.float32).eps * np.abs(x.astype(np.float64)).sum(axis=0, keepdims=True)


CONTRACT = Contract(
    name="cumulative sum",
    arguments=[Argument("x", rank=2, dtypes=("float32",), layouts=(SEQ,))],
    mesh_axes=("seq",),
    out=SEQ,
    oracle=ITSELF,  # the function's own result on one device
    rtol=0.0,
    atol=rounding,
)

# The correct function, and each broken variant with the checks that catch it (read by
# tests/mutation_score.py, which runs the kit on each of them).
CORRECT = ("cumsum",)
KILLED_BY = {
    "no_carry": ("fn.values",),
    "carry_all": ("fn.values",),
    "carry_reversed": ("fn.values",),
    "wrong_axis": ("fn.values",),
    "cache_last_only": ("fn.histories",),
    "cache_two_meshes": ("fn.histories",),
    "cache_device_set": ("fn.histories",),
    "cache_flat_ids": ("fn.histories",),
    "cache_mesh_shape": ("fn.histories",),
    "cache_axis_names": ("fn.histories",),
    "cache_first_context": ("fn.histories",),
}
