"""Correct: an LRU of jitted functions keyed by the full mesh identity (devices in order, axis names, shape, axis types)."""

from __future__ import annotations

import collections
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MAX_MESHES = 4096  # far more meshes than a process sees; an eviction would only cost a compile

_lru: collections.OrderedDict[Any, tuple[Any, NamedSharding, int]] = collections.OrderedDict()


def _key(mesh: Mesh | None) -> Any:
    if mesh is None:
        return None
    return (
        mesh.axis_names,
        mesh.devices.shape,
        tuple(d.id for d in mesh.devices.flat),
        tuple(str(t) for t in mesh.axis_types),
    )


def _lookup(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    key = _key(mesh)
    hit = _lru.get(key)
    if hit is not None:
        _lru.move_to_end(key)
        return hit
    where = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
    sharding = NamedSharding(where, PartitionSpec("data"))
    fn = jax.jit(lambda v: v * 2, in_shardings=sharding, out_shardings=sharding)
    hit = _lru[key] = (fn, sharding, int(where.shape["data"]))
    while len(_lru) > MAX_MESHES:
        _lru.popitem(last=False)
    return hit


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    fn, sharding, parts = _lookup(mesh)
    length = x.shape[0]
    if length % parts != 0:
        raise ValueError(f"pjit_double: length {length} is not a multiple of the data axis size {parts}")
    if isinstance(x, np.ndarray):
        if not x.dtype.isnative:
            x = x.astype(x.dtype.newbyteorder("="))
    elif isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        if x.committed and not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)  # jit must not move foreign-placed inputs itself
    return fn(x)
