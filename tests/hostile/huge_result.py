"""Hostile: every call returns about 10**8 ones (0.2-0.8 GB), split over every device.

Not a mutant (``tests/mutants/`` are small defects the kit must name); it is
here to show that the kit's memory stays bounded whatever a result's size:
``python bench/peak_rss.py`` runs the suite on it and prints the peak RSS.
The first such result fails its check as far larger than its input, and the
kit calls the implementation no more (SPEC, "Time"): the run ends at once.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

KILLED_BY = ("result.type",)
SIZE = 840 * 119_048  # 100_000_320: every mesh size the kit draws (1 to 8 devices) divides it

_cache: dict[Any, tuple[Any, NamedSharding, int]] = {}


def _for_mesh(mesh: Mesh | None) -> tuple[Any, NamedSharding, int]:
    entry = _cache.get(mesh)
    if entry is None:
        target = Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh
        sharding = NamedSharding(target, PartitionSpec("data"))
        # Split over every device (the target layout on 1-D meshes), never replicated:
        # each result holds 10**8 elements in all, whatever the mesh.
        split = NamedSharding(target, PartitionSpec(tuple(target.axis_names)))
        fn = jax.jit(lambda x: jnp.ones(SIZE, x.dtype), in_shardings=sharding, out_shardings=split)
        entry = _cache[mesh] = (fn, sharding, int(target.shape["data"]))
    return entry


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> Any:
    fn, sharding, size = _for_mesh(mesh)
    n = x.shape[0]
    if n % size:
        raise ValueError(f"length {n} is not divisible by the 'data' axis size {size}")
    if isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(sharding, 1):
        x = jax.device_put(x, sharding)
    return fn(x)
