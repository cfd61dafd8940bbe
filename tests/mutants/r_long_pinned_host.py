"""Results longer than 65536 elements are written to pinned_host memory (out_shardings memory_kind) "to spare device memory"."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("layout.default-device", "layout.mesh", "jit.shardings")

HOST_ABOVE = 65536  # elements


def _double(x: jax.Array) -> jax.Array:
    return x + x


_cache: dict[Any, tuple[Any, Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        on_host = NamedSharding(target, PartitionSpec("data"), memory_kind="pinned_host")
        small = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        large = jax.jit(_double, in_shardings=sharding, out_shardings=on_host)
        entry = _cache[mesh] = (small, large, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    small, large, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if (
        isinstance(x, jax.Array)
        and not isinstance(x, jax.core.Tracer)
        and x.committed
        and not x.sharding.is_equivalent_to(sharding, 1)
    ):
        x = jax.device_put(x, sharding)
    return (large if n > HOST_ABOVE else small)(x)
