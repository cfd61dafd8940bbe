"""``pjit_double``'s full contract, as a user declares it with the public API alone.

The kit's own ``--contract full`` (``conformance.contracts.FULL``) is this declaration; a copy
written from docs/contracts.md is judged the same way, by every check of the kit, since it is of
the one-vector form (``CONTRACT.one_vector()`` is None)::

    python -m pytest --pyargs conformance --impl reference:pjit_double \
        --contract examples/contracts/pjit_double.py:CONTRACT

``python tests/mutation_score.py --contract examples/contracts/pjit_double.py:CONTRACT`` runs the
kit's mutant catalogue (tests/mutants/) under it.
"""

from __future__ import annotations

import numpy as np
from jax.sharding import PartitionSpec as P

from conformance.contracts import Argument, Contract

DTYPES = (
    *("float32", "bfloat16", "float16"),
    *("int8", "int16", "int32", "uint8", "uint16", "uint32", "complex64"),
    *("float64", "int64", "complex128"),  # only where jax_enable_x64 is on
)


def doubled(x: np.ndarray) -> np.ndarray:
    """x doubled in its own dtype: integers wrap; complex numbers as x + x (inf+0j stays inf+0j)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return x + x if x.dtype.kind == "c" else np.multiply(x, x.dtype.type(2), dtype=x.dtype)


def times_two_plus_0j(x: np.ndarray) -> np.ndarray | None:
    """What ``2 * x`` gives for complex x: IEEE multiplication by 2+0j, which differs from x + x in
    the sign of zero parts and gives inf+nanj for inf+0j; None (nothing else) for other dtypes."""
    if x.dtype.kind != "c":
        return None
    a, b = x.real.copy(), x.imag.copy()
    two, zero = a.dtype.type(2), a.dtype.type(0)
    product = np.empty_like(x)
    with np.errstate(invalid="ignore", over="ignore"):
        product.real = a * two - b * zero
        product.imag = b * two + a * zero
    return product


CONTRACT = Contract(
    name="pjit_double, as a user declares it",
    arguments=[
        Argument(
            "x",
            rank=1,
            dtypes=DTYPES,
            layouts=(P("data"),),
            placements=(
                *("layouts", "numpy", "uncommitted", "device", "elsewhere", "memory-kinds"),
                "numpy-forms",  # strided and reversed views, the other byte order, read-only
            ),
            values={"allow_nan": True, "allow_infinity": True, "allow_subnormal": True},
        )
    ],
    mesh="keyword",
    mesh_optional=True,
    mesh_axes=("data",),
    out=P("data"),
    oracle=doubled,
    accept=(times_two_plus_0j,),
    rtol=0.0,
    atol=0.0,
    raises=ValueError,
    min_side=0,
    max_side=64,
)
