"""``pjit_double``: double a vector with jax.jit, sharded over a mesh's 'data' axis.

Fast by construction: the jitted function for a mesh is built once and kept
(the exercise's own version builds a new one per call, and every call
compiles); per call there is one dictionary look-up, a divisibility test,
and a ``jax.device_put`` only for committed inputs of another layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"

_compiled: dict[Mesh | None, tuple[Callable[[Any], jax.Array], NamedSharding, int]] = {}


def _double(x: jax.Array) -> jax.Array:
    return x + x  # exact in every dtype; for complex, component by component


def _for_mesh(mesh: Mesh | None) -> tuple[Callable[[Any], jax.Array], NamedSharding, int]:
    entry = _compiled.get(mesh)
    if entry is None:
        target_mesh = Mesh(np.array(jax.devices()[:1]), (DATA_AXIS,)) if mesh is None else mesh
        sharding = NamedSharding(target_mesh, PartitionSpec(DATA_AXIS))
        fn = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        entry = _compiled[mesh] = (fn, sharding, int(target_mesh.shape[DATA_AXIS]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    """Return ``2 * x`` laid out as ``NamedSharding(mesh, PartitionSpec('data'))``.

    ``mesh=None`` means a one-device mesh over ``jax.devices()[:1]``.  Raises
    ``ValueError`` when the length is not a multiple of the data axis size.
    """
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"pjit_double: length {n} is not divisible by the size {size} "
                         f"of the mesh's {DATA_AXIS!r} axis")
    # jit rejects committed arrays laid out differently; move those first.
    if (isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed
            and x.sharding is not sharding and not x.sharding.is_equivalent_to(sharding, 1)):
        x = jax.device_put(x, sharding)
    return fn(x)
