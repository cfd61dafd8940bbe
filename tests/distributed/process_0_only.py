"""Deadlocks: only process 0 calls the compiled function, which needs every process (a sum over 'data')."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

_compiled = {}


def pjit_double(x, *, mesh=None):
    m = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
    s = NamedSharding(m, PartitionSpec("data"))
    if x.shape[0] % m.shape["data"]:
        raise ValueError("length not divisible by the data axis")
    if mesh not in _compiled:
        # The sum is a collective across the data axis: 0 * sum(x) changes no value but
        # makes every process's devices take part in each call.
        _compiled[mesh] = jax.jit(
            lambda v: v + v + jnp.zeros_like(v) * jnp.sum(jnp.abs(v)), in_shardings=s, out_shardings=s
        )
    if jax.process_index() == 0:
        return _compiled[mesh](x)
    return x  # process 1 skips the call: process 0 waits for it forever
