"""Class 2, memory kinds: the result is laid out in the input's memory kind (an x in pinned_host memory gives a result in pinned_host), not in the target's device memory."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("inputs.placements",)

_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _for(mesh: Mesh | None, kind: str | None) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get((mesh, kind))
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        s = NamedSharding(target, PartitionSpec("data"), memory_kind=kind)
        fn = jax.jit(lambda v: v * 2, in_shardings=s, out_shardings=s)
        entry = _cache[(mesh, kind)] = (fn, s, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    kind = None
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        kind = x.sharding.memory_kind  # "keep the data where the caller keeps it"
        kind = None if kind == "device" else kind
    fn, s, size = _for(mesh, kind)
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
