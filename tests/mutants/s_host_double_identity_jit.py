"""The doubling is done on the host with NumPy; the jax.jit with the target in/out shardings is an identity that only lays the result out."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("jit.shardings",)

_cache: dict[Mesh | None, tuple[Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        layout = jax.jit(lambda v: v, in_shardings=sharding, out_shardings=sharding)
        entry = _cache[mesh] = (layout, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    layout, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    host = np.asarray(x)  # a jax.Array is fetched; a NumPy x is read, never written
    with np.errstate(all="ignore"):  # integers wrap, floats overflow to inf: as 2 * x does
        doubled = host + host  # a new, native-order array
    return layout(doubled)
