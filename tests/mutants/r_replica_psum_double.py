"""On meshes with a second axis, shard_map sums 2*x over the replicas and divides by their number: overflows near max, wraps ints wrongly."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("values.float32", "values.all-dtypes")


def _double(x: jax.Array) -> jax.Array:
    return x + x


def _replica_double(mesh: Mesh) -> Any:
    others = tuple(a for a in mesh.axis_names if a != "data")
    replicas = int(np.prod([mesh.shape[a] for a in others]))

    def block(b: jax.Array) -> jax.Array:
        # Each replica doubles its copy; summing and dividing by the replica
        # count makes the replicas provably agree.
        total = jax.lax.psum(b + b, others)
        return (total / replicas).astype(b.dtype)

    return jax.shard_map(block, mesh=mesh, in_specs=PartitionSpec("data"), out_specs=PartitionSpec("data"))


_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        body = _replica_double(target) if target.size > target.shape["data"] else _double
        fn = jax.jit(body, in_shardings=sharding, out_shardings=sharding)
        entry = _cache[mesh] = (fn, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        if not x.sharding.is_equivalent_to(sharding, 1):
            x = jax.device_put(x, sharding)
    return fn(x)
