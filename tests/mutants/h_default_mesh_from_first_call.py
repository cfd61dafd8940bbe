"""The default mesh is built on the process's first call from the default device: under jax.default_device(d), later results land on d."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("state.first-call",)


def _double(x: jax.Array) -> jax.Array:
    return x + x


_default: list[Mesh] = []  # built on the first call
_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    if not _default:
        where = next(iter(jnp.zeros(()).devices()))  # "the default device": jax.devices()[0] ... usually
        _default.append(Mesh(np.array([where]), ("data",)))
    entry = _cache.get(mesh)
    if entry is None:
        target = _default[0] if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        fn = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
        entry = _cache[mesh] = (fn, sharding, int(target.shape["data"]))
    return entry


def _placed(x: Any, sharding: NamedSharding) -> Any:
    if isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(sharding, 1):
        return jax.device_put(x, sharding)
    return x


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    return fn(_placed(x, sharding))
