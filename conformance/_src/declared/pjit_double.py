"""``pjit_double``'s two contracts, ``seed`` and ``full``, declared with the public API.

``--contract seed`` and ``--contract full`` name these two declarations; the kit's checks read
from them what they judge (``terms.py``): the function's mesh, the dtypes, where the
input comes from, the layout, the oracle and the error.  ``conformance.contracts.SEED``,
``FULL`` and ``PJIT_DOUBLE`` (the same as ``FULL``) are them.
"""

from __future__ import annotations

import functools

import numpy as np
from jax.sharding import PartitionSpec

from conformance._src.declared.contract import PLACEMENT_KINDS, Argument, Contract

DATA_AXIS = "data"
# Every dtype full keeps; the last three only where jax_enable_x64 is on.
FULL_DTYPES = (
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
    "float64",
    "int64",
    "complex128",
)
X64_DTYPES = ("float64", "int64", "complex128")
# Every value of the dtype: NaN (payloads kept), infinities, signed zeros, subnormals, extremes.
EVERY_VALUE = {"allow_nan": True, "allow_infinity": True, "allow_subnormal": True}


def doubled(x: np.ndarray) -> np.ndarray:
    """The exact double in x's own dtype: integers wrap; complex numbers component by component
    (``x + x``), so that ``inf+0j`` doubles to ``inf+0j``."""
    with np.errstate(over="ignore", invalid="ignore"):
        if x.dtype.kind == "c":
            return x + x
        return np.multiply(x, x.dtype.type(2), dtype=x.dtype)


def times_two_plus_0j(x: np.ndarray) -> np.ndarray | None:
    """What ``2 * x`` compiles to for complex x: IEEE multiplication by ``2+0j``, which differs
    from ``x + x`` in the sign of zero components and gives ``inf+nanj`` for ``inf+0j`` (None for
    other dtypes, where it is ``doubled``)."""
    if x.dtype.kind != "c":
        return None
    a, b = x.real.copy(), x.imag.copy()
    two, zero = a.dtype.type(2), a.dtype.type(0)
    with np.errstate(invalid="ignore", over="ignore"):
        product = np.empty_like(x)
        product.real = a * two - b * zero
        product.imag = b * two + a * zero
    return product


@functools.cache
def seed() -> Contract:
    """The exercise as written: ``pjit_double(x)`` doubles a float32 vector on the first device,
    laid out ``P('data')`` over a mesh of it alone, every value exact."""
    return Contract(
        name="seed",
        arguments=[
            Argument(
                "x",
                rank=1,
                dtypes=("float32",),
                layouts=(PartitionSpec(DATA_AXIS),),
                placements=("uncommitted",),
                values=EVERY_VALUE,
            )
        ],
        mesh="none",
        mesh_axes=(DATA_AXIS,),
        out=PartitionSpec(DATA_AXIS),
        oracle=doubled,
        rtol=0.0,
        atol=0.0,
    )


@functools.cache
def full() -> Contract:
    """``pjit_double(x, *, mesh=None)``: x doubled in its own dtype, every dtype, every value, from
    anywhere (NumPy, uncommitted, another device or layout, another memory kind), laid out
    ``P('data')`` over the mesh (the first device without one); a length the data axis does not
    divide raises ``ValueError``."""
    return Contract(
        name="full",
        arguments=[
            Argument(
                "x",
                rank=1,
                dtypes=FULL_DTYPES,
                layouts=(PartitionSpec(DATA_AXIS),),
                placements=PLACEMENT_KINDS,
                values=EVERY_VALUE,
            )
        ],
        mesh="keyword",
        mesh_optional=True,
        mesh_axes=(DATA_AXIS,),
        out=PartitionSpec(DATA_AXIS),
        oracle=doubled,
        accept=(times_two_plus_0j,),
        rtol=0.0,
        atol=0.0,
        raises=ValueError,
        min_side=0,
        max_side=64,
    )
