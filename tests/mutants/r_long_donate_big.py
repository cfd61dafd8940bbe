"""Inputs larger than 1 MiB go through a jit with donate_argnums=0 "to save memory": the caller's big x is deleted."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("hygiene.input-intact",)

DONATE_ABOVE = 1 << 20  # bytes


def _double(x: jax.Array) -> jax.Array:
    return x + x


_cache: dict[Any, tuple[Any, Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        plain = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        donating = jax.jit(_double, in_shardings=sharding, out_shardings=sharding, donate_argnums=0)
        entry = _cache[mesh] = (plain, donating, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    plain, donating, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if (
        isinstance(x, jax.Array)
        and not isinstance(x, jax.core.Tracer)
        and x.committed
        and not x.sharding.is_equivalent_to(sharding, 1)
    ):
        x = jax.device_put(x, sharding)
    big = n * np.dtype(x.dtype).itemsize > DONATE_ABOVE
    return (donating if big else plain)(x)
