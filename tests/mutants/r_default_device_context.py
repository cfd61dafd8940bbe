"""mesh=None is resolved to the current default device (jax.default_device context), not jax.devices()[:1]."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("layout.default-device",)


def _double(x: jax.Array) -> jax.Array:
    return x + x


_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _resolve(mesh: Mesh | None) -> Mesh:
    if mesh is not None:
        return mesh
    device = jax.config.jax_default_device or jax.devices()[0]  # "the device the user asked for"
    if isinstance(device, str):
        device = jax.devices(device)[0]
    return Mesh(np.array([device]), ("data",))


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    target = _resolve(mesh)
    entry = _cache.get(target)
    if entry is None:
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        entry = _cache[target] = (fn, sharding, int(target.shape["data"]))
    fn, sharding, size = entry
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        if not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)
    return fn(x)
