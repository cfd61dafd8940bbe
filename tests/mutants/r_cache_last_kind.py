"""Per mesh, only the jitted function for the last (dtype, placement kind) is kept: a change in between rebuilds and recompiles."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("compile.once",)


def _specialised(dtype: np.dtype) -> Any:
    def double(v: jax.Array) -> jax.Array:
        return (v + v).astype(dtype)  # pin the result dtype

    return double


_cache: dict[Any, tuple[Any, Any, NamedSharding, int]] = {}  # mesh -> (kind, fn, sharding, size)


def _kind(x: Any) -> tuple[Any, ...]:
    return (np.dtype(x.dtype), type(x).__name__, bool(getattr(x, "committed", False)))


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    kind = _kind(x)
    entry = _cache.get(mesh)
    if entry is None or entry[0] != kind:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(_specialised(kind[0]), in_shardings=sharding, out_shardings=sharding)
        entry = _cache[mesh] = (kind, fn, sharding, int(target.shape["data"]))
    _, fn, sharding, size = entry
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        if not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)
    return fn(x)
