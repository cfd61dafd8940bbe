"""Correct: AOT in stages, jax.jit(f, in/out shardings).trace(...).lower().compile() per (mesh, length, dtype); inputs placed as the executable's input_shardings say.

A compiled executable cannot be traced, but it states its own shardings:
the kit watches its calls and judges them as it judges jax.jit's.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

_targets: dict[Mesh | None, NamedSharding] = {}
_compiled: dict[tuple[Any, ...], Any] = {}


def _target(mesh: Mesh | None) -> NamedSharding:
    if mesh not in _targets:
        where = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
        _targets[mesh] = NamedSharding(where, PartitionSpec("data"))
    return _targets[mesh]


def _executable(mesh: Mesh | None, n: int, dtype: np.dtype) -> Any:
    key = (mesh, n, dtype)
    if key not in _compiled:
        target = _target(mesh)
        jitted = jax.jit(lambda v: v + v, in_shardings=target, out_shardings=target)
        traced = jitted.trace(jax.ShapeDtypeStruct((n,), dtype, sharding=target))
        _compiled[key] = traced.lower().compile()
    return _compiled[key]


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    target = _target(mesh)
    parts = int(target.mesh.shape["data"])
    n = x.shape[0]
    if n % parts:
        raise ValueError(f"length {n} is not divisible by the data axis size {parts}")
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))  # a copy: the caller's array is left as it is
    executable = _executable(mesh, int(n), np.dtype(x.dtype))
    (wanted,), _ = executable.input_shardings  # ((sharding of x,), {})
    if not (
        isinstance(x, jax.Array)
        and not isinstance(x, jax.core.Tracer)
        and x.sharding.is_equivalent_to(wanted, 1)
    ):
        x = jax.device_put(x, wanted)  # an executable takes its input in exactly its own layout
    return executable(x)
