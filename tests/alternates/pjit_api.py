"""Correct: the older jax.experimental.pjit.pjit API, with its DeprecationWarning silenced."""

from __future__ import annotations

import warnings
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from jax.experimental.pjit import pjit

_fns: dict[Mesh | None, tuple[Any, NamedSharding]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding]:
    if mesh not in _fns:
        target = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
        sharding = NamedSharding(target, PartitionSpec("data"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            fn = pjit(lambda v: v + v, in_shardings=sharding, out_shardings=sharding)
        _fns[mesh] = (fn, sharding)
    return _fns[mesh]


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    fn, sharding = _for_mesh(mesh)
    size = sharding.mesh.shape["data"]
    if x.shape[0] % size:
        raise ValueError(f"pjit_double: length {x.shape[0]} is not a multiple of the data axis size {size}")
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.committed:
        x = jax.device_put(x, sharding)  # a no-op when it is already laid out so
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return fn(x)
