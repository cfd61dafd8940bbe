"""The exercise's own solution: no mesh keyword (and a new jit per call)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("api.mesh-keyword",)


def pjit_double(x: Any) -> Any:
    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    return jax.jit(lambda v: v * 2, in_shardings=sharding, out_shardings=sharding)(x)
