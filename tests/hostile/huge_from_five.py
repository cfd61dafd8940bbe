"""Hostile: right below 5 elements, a 400 MB array for vectors of 5 or more (issue 27, item 7).

Not a mutant: it shows that the kit judges a result and drops it, whatever
its size.  Vectors of 0 to 4 elements are doubled by the reference; from 5
elements on, every call returns about ``BYTES`` bytes (``KIT_HOSTILE_BYTES``,
400 MB by default) of the input's dtype, split over every device of the
mesh: the wrong shape, which ``result.type`` must name.  A test runs it with a
smaller size (tests/test_kit_supervision.py); ``python bench/peak_rss.py
--impl tests/hostile/huge_from_five.py:pjit_double`` measures the full size.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from reference.double import pjit_double as _reference

KILLED_BY = ("result.type",)
BYTES = int(os.environ.get("KIT_HOSTILE_BYTES", 400_000_000))
FROM = 5  # the shortest vector whose result is huge

_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None, dtype: Any) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get((mesh, dtype))
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        split = NamedSharding(target, PartitionSpec(tuple(target.axis_names)))
        # A multiple of 840, so that every mesh size the kit draws (1 to 8 devices) divides it.
        size = max(840, BYTES // np.dtype(dtype).itemsize // 840 * 840)
        fn = jax.jit(lambda x: jnp.ones(size, x.dtype), in_shardings=sharding, out_shardings=split)
        entry = _cache[(mesh, dtype)] = (fn, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    if x.shape[0] < FROM:
        return _reference(x, mesh=mesh)
    fn, sharding, size = _for_mesh(mesh, x.dtype)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if not isinstance(x, jax.Array) or (
        isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(sharding, 1)
    ):
        x = jax.device_put(np.asarray(x) if not isinstance(x, jax.Array) else x, sharding)
    return fn(x)
