"""What the kit's checks read from a contract of the one-vector form: the target layout, the
dtype domain, whether the function is given a mesh.

A contract is a declaration (``conformance.contracts.Contract``); ``pjit_double``'s two,
``seed`` and ``full``, are declared in pjit_double.py beside it and named on the command line
(``--contract seed|full``, ``named``).  The specification in prose is SPEC.md.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from conformance._src.declared import pjit_double
from conformance._src.declared.contract import Contract

DATA_AXIS = pjit_double.DATA_AXIS
NAMES = ("seed", "full")  # the contracts --contract names by name
WIDE = frozenset({"float64", "int64", "uint64", "complex128"})  # JAX has them only with jax_enable_x64


def named(name: str) -> Contract:
    """``--contract seed`` or ``full``: the declaration (ValueError for another name)."""
    if name == "seed":
        return pjit_double.seed()
    if name == "full":
        return pjit_double.full()
    raise ValueError(f"{name!r} is not one of {NAMES}")


def default_mesh() -> Mesh:
    """The seed's mesh: the first visible device only, axis 'data'."""
    return Mesh(np.array(jax.devices()[:1]), (DATA_AXIS,))


def target_sharding(mesh: Mesh | None) -> NamedSharding:
    """The layout the result must have; ``None`` means the seed's mesh."""
    return NamedSharding(default_mesh() if mesh is None else mesh, PartitionSpec(DATA_AXIS))


def data_axis_size(mesh: Mesh | None) -> int:
    """Only the data axis divides the vector; any other mesh axis replicates."""
    return 1 if mesh is None else int(mesh.shape[DATA_AXIS])


def dtypes_in_domain(contract: Contract, *, x64: bool = False) -> list[np.dtype]:
    """The input dtypes a contract covers, each of which must be preserved (its 64-bit ones
    only where ``x64``: without jax_enable_x64, JAX has none)."""
    names = [d for d in contract.first.dtypes if x64 or d not in WIDE]
    return [np.dtype(jax.numpy.dtype(name)) for name in names]
