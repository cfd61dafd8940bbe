"""Only the last mesh's jitted function is kept: mesh A, then B, then A again builds (and compiles) a new one."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("compile.once",)

_last: tuple[Any, Any, NamedSharding, int] | None = None  # (mesh, fn, sharding, size): "one mesh at a time"


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    global _last
    if _last is None or _last[0] != mesh:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(lambda v: v + v, in_shardings=sharding, out_shardings=sharding)
        _last = (mesh, fn, sharding, int(target.shape["data"]))
    return _last[1], _last[2], _last[3]


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        if not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)
    return fn(x)
