"""Broken only on process 1's shards ($KIT_WRONG_PROCESS's, if set): there it adds one after doubling."""

import os

import jax
from jax.sharding import NamedSharding, PartitionSpec

from reference import pjit_double as _reference

_off_by_one = {}


def pjit_double(x, *, mesh=None):
    result = _reference(x, mesh=mesh)
    if jax.process_index() != int(os.environ.get("KIT_WRONG_PROCESS", "1")) or x.shape[0] == 0:
        return result
    s = result.sharding
    if not isinstance(s, NamedSharding):
        return result
    if s not in _off_by_one:
        spec = PartitionSpec("data")
        _off_by_one[s] = jax.jit(
            lambda v: v + 1,
            in_shardings=NamedSharding(s.mesh, spec),
            out_shardings=NamedSharding(s.mesh, spec),
        )
    return _off_by_one[s](result)  # only this process's shards change
