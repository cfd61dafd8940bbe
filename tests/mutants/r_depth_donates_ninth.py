"""Class 1, depth on one key: from the 9th call of a (mesh, shape, dtype) with an input already in the target layout, that input is donated to the jit (the caller's x is deleted)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("state.histories",)

DEPTH = 9  # "by then the caller is done with its arrays"

_cache: dict[Any, tuple[Any, Any, NamedSharding, int]] = {}
_calls: dict[Any, int] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        s = NamedSharding(target, PartitionSpec("data"))
        keep = jax.jit(lambda v: v * 2, in_shardings=s, out_shardings=s)
        donate = jax.jit(lambda v: v * 2, in_shardings=s, out_shardings=s, donate_argnums=0)
        entry = _cache[mesh] = (keep, donate, s, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    keep, donate, s, size = _for_mesh(mesh)
    if x.shape[0] % size:
        raise ValueError(f"length {x.shape[0]} is not divisible by {size}")
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    key = (mesh, x.shape, str(x.dtype))
    if isinstance(x, jax.Array) and x.committed:
        if x.sharding.is_equivalent_to(s, 1):
            _calls[key] = _calls.get(key, 0) + 1  # calls of this key in the target layout
            return donate(x) if _calls[key] >= DEPTH else keep(x)
        x = jax.device_put(x, s)
    elif isinstance(x, jax.Array) and size > 1:
        x = jax.device_put(x, s)
    return keep(x)
