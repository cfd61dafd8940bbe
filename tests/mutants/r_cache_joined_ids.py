"""Class 3, many devices: the jitted function is cached by the mesh's device ids joined into a string without a separator, so ids 1, 12 and 11, 2 (both "112") share a layout."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("state.histories",)
DEVICES = 16  # ids of two digits: the defect needs ten or more devices

_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _key(mesh: Mesh | None) -> Any:
    if mesh is None:
        return None
    ids = "".join(str(d.id) for d in mesh.devices.flat)  # "a compact, hashable key"
    return (ids, mesh.devices.shape, mesh.axis_names)


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    key = _key(mesh)
    entry = _cache.get(key)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        s = NamedSharding(target, PartitionSpec("data"))
        entry = _cache[key] = (
            jax.jit(lambda v: v * 2, in_shardings=s, out_shardings=s),
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
