"""A data axis of 1, 2, 4 or 8 devices gets the split layout; any other size (3, 5, 6, 7) comes back replicated over the mesh (out_shardings P())."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("layout.mesh", "jit.shardings")

FAST_SIZES = (1, 2, 4, 8)  # the sizes XLA's collectives like; the rest take the "safe" path

_cache: dict[Mesh | None, tuple[Any, NamedSharding, int]] = {}


def _double(x: jax.Array) -> jax.Array:
    return x + x


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        size = int(target.shape["data"])
        out = sharding if size in FAST_SIZES else NamedSharding(target, PartitionSpec())
        fn = jax.jit(_double, in_shardings=sharding, out_shardings=out)
        entry = _cache[mesh] = (fn, sharding, size)
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        if not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)
    return fn(x)
