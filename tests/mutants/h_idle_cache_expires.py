"""Cache entries idle for 3 s (time.monotonic) are dropped: after a pause, a seen call compiles again."""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("state.histories",)

IDLE_SECONDS = 3.0


def _double(x: jax.Array) -> jax.Array:
    return x + x


_cache: dict[Any, tuple[Any, NamedSharding, int, float]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    now = time.monotonic()
    entry = _cache.get(mesh)
    if entry is None or now - entry[3] > IDLE_SECONDS:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(lambda v: _double(v), in_shardings=sharding, out_shardings=sharding)
        entry = (fn, sharding, int(target.shape["data"]), now)
    _cache[mesh] = (*entry[:3], now)
    return entry[0], entry[1], entry[2]


def _placed(x: Any, sharding: NamedSharding) -> Any:
    if isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(sharding, 1):
        return jax.device_put(x, sharding)
    return x


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    return fn(_placed(x, sharding))
