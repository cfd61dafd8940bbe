"""Vectors longer than 8192 are doubled in 4096-element chunks inside the jit, and the tail after the last full chunk is copied undoubled."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("values.float32", "values.all-dtypes")

CHUNK = 4096  # elements per chunk, "to keep the working set in cache"


def _double(x: jax.Array) -> jax.Array:
    n = x.shape[0]
    if n <= 2 * CHUNK:
        return x + x
    full = n // CHUNK * CHUNK
    body = x[:full].reshape(-1, CHUNK)
    body = body + body
    return jnp.concatenate([body.reshape(-1), x[full:]])  # the tail was meant to be doubled too


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
    if (
        isinstance(x, jax.Array)
        and not isinstance(x, jax.core.Tracer)
        and x.committed
        and not x.sharding.is_equivalent_to(sharding, 1)
    ):
        x = jax.device_put(x, sharding)
    return fn(x)
