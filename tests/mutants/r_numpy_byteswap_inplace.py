"""Non-native byte order ('>f4') NumPy inputs are fixed with x.byteswap(inplace=True): the caller's array is scrambled."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("hygiene.input-intact",)


def _double(x: jax.Array) -> jax.Array:
    return x + x


_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        entry = _cache[mesh] = (fn, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, np.ndarray):
        if not x.dtype.isnative:
            # JAX rejects non-native byte order: swap the bytes and relabel the dtype.
            x = x.byteswap(inplace=True).view(x.dtype.newbyteorder("="))
    elif not isinstance(x, jax.core.Tracer) and x.committed and not x.sharding.is_equivalent_to(sharding, 1):
        x = jax.device_put(x, sharding)
    return fn(x)
