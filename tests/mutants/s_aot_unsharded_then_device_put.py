"""An ahead-of-time executable compiled without shardings runs on device 0; its output is jax.device_put into the target layout afterwards."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("jit.shardings",)

_executables: dict[tuple[int, np.dtype], Any] = {}
_shardings: dict[Mesh | None, NamedSharding] = {}


def _sharding(mesh: Mesh | None) -> NamedSharding:
    if mesh not in _shardings:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        _shardings[mesh] = NamedSharding(target, PartitionSpec("data"))
    return _shardings[mesh]


def _executable(n: int, dtype: np.dtype) -> Any:
    # The computation does not depend on the mesh: compile it once per shape and dtype.
    key = (n, dtype)
    if key not in _executables:
        _executables[key] = jax.jit(lambda v: v + v).lower(jax.ShapeDtypeStruct((n,), dtype)).compile()
    return _executables[key]


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    sharding = _sharding(mesh)
    size = int(sharding.mesh.shape["data"])
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))  # a copy: the caller's array stays as it is
    dtype = np.dtype(x.dtype)
    x = jax.device_put(x, jax.devices()[0])  # where the executable was compiled for
    return jax.device_put(_executable(int(n), dtype)(x), sharding)
