"""Correct: an ahead-of-time compiled executable per (mesh, shape, dtype), via .lower(...).compile().

A compiled executable cannot be traced, but it states its own shardings:
the kit watches its calls and judges them as it judges jax.jit's.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

_executables: dict[tuple[Any, ...], Any] = {}
_shardings: dict[Mesh | None, NamedSharding] = {}


def _sharding(mesh: Mesh | None) -> NamedSharding:
    if mesh not in _shardings:
        target = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
        _shardings[mesh] = NamedSharding(target, PartitionSpec("data"))
    return _shardings[mesh]


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    sharding = _sharding(mesh)
    size = int(sharding.mesh.shape["data"])
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the data axis size {size}")
    dtype = np.dtype(x.dtype)
    key = (mesh, n, dtype)
    if key not in _executables:
        abstract = jax.ShapeDtypeStruct((n,), dtype, sharding=sharding)
        jitted = jax.jit(lambda v: v + v, in_shardings=sharding, out_shardings=sharding)
        _executables[key] = jitted.lower(abstract).compile()
    # An executable takes its inputs in exactly its own layout.
    if not (
        isinstance(x, jax.Array)
        and not isinstance(x, jax.core.Tracer)
        and x.sharding.is_equivalent_to(sharding, 1)
    ):
        x = jax.device_put(x, sharding)
    return _executables[key](x)
