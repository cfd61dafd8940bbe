"""Correct: inputs not already in the target layout are rebuilt there with jax.make_array_from_callback from a host copy, then one cached jit."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

_jitted: dict[Mesh | None, tuple[Any, NamedSharding, int]] = {}


def _per_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    if mesh not in _jitted:
        where = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
        target = NamedSharding(where, PartitionSpec("data"))
        fn = jax.jit(lambda v: v + v, in_shardings=target, out_shardings=target)
        _jitted[mesh] = (fn, target, int(where.shape["data"]))
    return _jitted[mesh]


def _placed(x: Any, target: NamedSharding) -> Any:
    if isinstance(x, jax.core.Tracer):
        return x
    if isinstance(x, jax.Array) and x.sharding.is_equivalent_to(target, 1):
        return x
    host = np.asarray(x)  # a jax.Array is fetched; a NumPy x is only read
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))  # a copy, in native byte order
    # Each device gets its own slice of the host copy (sharded views are not contiguous: copy).
    return jax.make_array_from_callback(host.shape, target, lambda index: np.array(host[index]))


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    fn, target, parts = _per_mesh(mesh)
    if x.shape[0] % parts:
        raise ValueError(f"{x.shape[0]} elements do not split over {parts} 'data' devices")
    return fn(_placed(x, target))
