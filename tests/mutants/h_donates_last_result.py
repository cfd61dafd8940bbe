"""The array it returned last is taken for its own temporary and donated when passed back: r1 = f(x); r2 = f(r1) deletes r1."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("state.histories",)


def _double(x: jax.Array) -> jax.Array:
    return x + x


_cache: dict[Any, tuple[Any, Any, NamedSharding, int]] = {}
_last: list[Any] = [None]  # the result returned last


def _for_mesh(mesh: Mesh | None) -> tuple[Any, Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        reuse = jax.jit(_double, in_shardings=sharding, out_shardings=sharding, donate_argnums=0)
        entry = _cache[mesh] = (fn, reuse, sharding, int(target.shape["data"]))
    return entry


def _placed(x: Any, sharding: NamedSharding) -> Any:
    if isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(sharding, 1):
        return jax.device_put(x, sharding)
    return x


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, reuse, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    placed = _placed(x, sharding)
    mine = x is _last[0] and placed is x  # "my own buffer, in my layout: reuse it"
    result = (reuse if mine else fn)(placed)
    _last[0] = result
    return result
