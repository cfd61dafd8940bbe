"""An LRU of the 3 most recently used meshes holds the jitted functions: a mesh evicted and seen again is re-jitted and compiles again."""

from __future__ import annotations

import collections
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("state.histories",)

MAX_MESHES = 3  # "a training job uses one or two meshes at a time"

_lru: collections.OrderedDict[Mesh | None, tuple[Any, NamedSharding, int]] = collections.OrderedDict()


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    entry = _lru.get(mesh)
    if entry is not None:
        _lru.move_to_end(mesh)
        return entry
    target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
    sharding = NamedSharding(target, PartitionSpec("data"))
    fn = jax.jit(lambda v: v + v, in_shardings=sharding, out_shardings=sharding)
    entry = _lru[mesh] = (fn, sharding, int(target.shape["data"]))
    while len(_lru) > MAX_MESHES:
        _lru.popitem(last=False)
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        if not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)
    return fn(x)
