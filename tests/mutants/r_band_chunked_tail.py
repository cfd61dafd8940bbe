"""Class 4, lengths between the tiers: for 10 001 to 60 000 elements, a loop of fixed 10 000-element chunks doubles the vector and leaves the tail after the last full chunk undoubled."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("values.float32", "values.all-dtypes")

CHUNK = 10_000  # "the cache-friendly band"


def _double(x: jax.Array) -> jax.Array:
    n = x.shape[0]
    if not CHUNK < n <= 6 * CHUNK:
        return x * 2
    full = n // CHUNK * CHUNK
    body = x[:full].reshape(-1, CHUNK)
    return jnp.concatenate([(body * 2).reshape(-1), x[full:]])


_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        s = NamedSharding(target, PartitionSpec("data"))
        entry = _cache[mesh] = (
            jax.jit(_double, in_shardings=s, out_shardings=s),
            s,
            int(target.shape["data"]),
        )
    fn, s, size = entry
    if x.shape[0] % size:
        raise ValueError(f"length {x.shape[0]} is not divisible by {size}")
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    if (
        isinstance(x, jax.Array)
        and not isinstance(x, jax.core.Tracer)
        and not x.sharding.is_equivalent_to(s, 1)
    ):
        x = jax.device_put(x, s)
    return fn(x)
