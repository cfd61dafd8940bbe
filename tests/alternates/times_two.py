"""Correct: `2 * x` (a weakly typed Python 2) instead of `x + x`; x always device_put to the target first."""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


@functools.cache
def _target(mesh: Mesh | None) -> NamedSharding:
    return NamedSharding(
        mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",)), PartitionSpec("data")
    )


@functools.cache
def _jitted(sharding: NamedSharding) -> Any:
    return jax.jit(lambda v: 2 * v, in_shardings=sharding, out_shardings=sharding)


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    sharding = _target(mesh)
    if x.shape[0] % sharding.mesh.shape["data"]:
        raise ValueError(
            f"pjit_double: {x.shape[0]} elements cannot be split evenly over "
            f"{sharding.mesh.shape['data']} devices of axis 'data'"
        )
    return _jitted(sharding)(jax.device_put(x, sharding))
