"""What the two contracts ask for: the target layout and the dtype domain.

The kit's specification in prose is SPEC.md beside this file; this module is
its executable part.
"""

from __future__ import annotations

import enum

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"


class Contract(str, enum.Enum):  # noqa: UP042 -- str() and format() as they have always been
    SEED = "seed"  # the exercise as written: pjit_double(x), float32, one device
    FULL = "full"  # plus mesh=..., every dtype, every input placement


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
    """The input dtypes a contract covers, each of which must be preserved."""
    if contract is Contract.SEED:
        return [np.dtype(np.float32)]
    names = [
        "float32",
        "bfloat16",
        "float16",
        "int8",
        "int16",
        "int32",
        "uint8",
        "uint16",
        "uint32",
        "complex64",
    ]
    if x64:
        names += ["float64", "int64", "complex128"]
    return [np.dtype(jax.numpy.dtype(name)) for name in names]
