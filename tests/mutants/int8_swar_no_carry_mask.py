"""int8 and uint8 vectors past 65536 elements are doubled four bytes at a time, as packed 32-bit words shifted left, without the 0xFEFEFEFE mask: each byte's top bit carries into the next byte."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("values.all-dtypes",)

SWAR_ABOVE = 65536  # elements: "the vectorised path for long byte vectors"


def _double(x: jax.Array) -> jax.Array:
    n = x.shape[0]
    if x.dtype not in (jnp.int8, jnp.uint8) or n <= SWAR_ABOVE:
        return x + x
    whole = n // 4 * 4
    raw = jax.lax.bitcast_convert_type(x[:whole], jnp.uint8).reshape(-1, 4)
    words = jax.lax.bitcast_convert_type(raw, jnp.uint32)
    shifted = words << 1  # the carry mask (& 0xFEFEFEFE) was left out
    body = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(shifted, jnp.uint8).reshape(-1), x.dtype)
    return jnp.concatenate([body, x[whole:] + x[whole:]])


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
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    if (
        isinstance(x, jax.Array)
        and not isinstance(x, jax.core.Tracer)
        and x.committed
        and not x.sharding.is_equivalent_to(sharding, 1)
    ):
        x = jax.device_put(x, sharding)
    return fn(x)
