"""On a mesh whose data axis has size 1 (x replicated over 'model'), an input already in the target layout is donated and deleted."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("hygiene.input-intact",)


def _double(x: jax.Array) -> jax.Array:
    return x + x


_cache: dict[Any, tuple[Any, Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        in_place = jax.jit(_double, in_shardings=sharding, out_shardings=sharding, donate_argnums=0)
        entry = _cache[mesh] = (fn, in_place, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, in_place, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        if not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)
        elif size == 1 and sharding.mesh.size > 1:
            # Fully replicated over the other axis: every replica is already
            # where the result goes, so the copies are reused for the output.
            return in_place(x)
    return fn(x)
