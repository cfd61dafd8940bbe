"""Correct: bare PartitionSpecs for jit, resolved against the mesh set by `with jax.set_mesh(mesh):`.

The context manager restores the previous mesh on the way out, so no global
state is left behind.  ``jax.set_mesh`` refuses to run while tracing, so
jax.make_jaxpr cannot trace this: jit.shardings must watch a real call or
report the check inconclusive, never fail it.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

INCONCLUSIVE = ("jit.shardings",)  # may be: it cannot be traced, so its shardings may not be seen

_double = jax.jit(lambda v: v + v, in_shardings=PartitionSpec("data"), out_shardings=PartitionSpec("data"))
_default: list[Mesh] = []


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    if mesh is None:
        if not _default:
            _default.append(Mesh(np.array(jax.devices()[:1]), ("data",)))
        mesh = _default[0]
    size = int(mesh.shape["data"])
    if x.shape[0] % size:
        raise ValueError(f"length {x.shape[0]} is not divisible by mesh.shape['data'] = {size}")
    if isinstance(x, jax.Array) and x.committed:
        x = jax.device_put(x, NamedSharding(mesh, PartitionSpec("data")))
    with jax.set_mesh(mesh):
        return _double(x)
