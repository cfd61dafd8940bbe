"""Class 1, depth on one key: from the 4th call in a row of one (mesh, shape, dtype), a cached executable is called on the raw input, whatever its placement (no device_put first)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("state.histories",)

DEPTH = 4  # "a hot key": called again and again, its executable is called directly

_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}
_streak: list[Any] = [None, 0]  # the last key, and how many calls in a row it has had
_executables: dict[Any, Any] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        s = NamedSharding(target, PartitionSpec("data"))
        entry = _cache[mesh] = (
            jax.jit(lambda v: v * 2, in_shardings=s, out_shardings=s),
            s,
            int(target.shape["data"]),
        )
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, s, size = _for_mesh(mesh)
    if x.shape[0] % size:
        raise ValueError(f"length {x.shape[0]} is not divisible by {size}")
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    key = (mesh, x.shape, str(x.dtype))
    _streak[:] = [key, _streak[1] + 1 if _streak[0] == key else 1]
    if _streak[1] >= DEPTH:
        if key not in _executables:
            _executables[key] = fn.lower(jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)).compile()
        return _executables[key](x)  # the raw x: a NumPy or misplaced x is not moved first
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        if not x.sharding.is_equivalent_to(s, 1):
            x = jax.device_put(x, s)
    return fn(x)
