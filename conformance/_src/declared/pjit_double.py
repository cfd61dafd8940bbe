"""``pjit_double``'s full contract declared with the public API (``conformance.contracts``).

The same promise the ``seed``/``full`` checks judge, as data the declared engine judges too:
``--contract conformance.contracts:PJIT_DOUBLE`` runs the ``fn.*`` checks on an implementation of
``pjit_double``.  The seed contract (no ``mesh=``, one device) has no declared form: a declared
contract's function always gets a mesh.
"""

from __future__ import annotations

import numpy as np
from jax.sharding import PartitionSpec

from conformance._src.contract.terms import DATA_AXIS, Contract, dtypes_in_domain
from conformance._src.declared.contract import NUMPY, Argument
from conformance._src.declared.contract import Contract as Declared


def _doubled(x: np.ndarray) -> np.ndarray:
    return x + x  # as the oracle doubles: 2 * (inf+0j) would be inf+nanj


def pjit_double_contract() -> Declared:
    """``pjit_double(x, *, mesh)``: x doubled, its dtype kept, laid out ``P('data')`` over the mesh;
    a length the data axis does not divide raises ``ValueError``; every finite value of every dtype."""
    return Declared(
        name="pjit_double (full)",
        arguments=[
            Argument(
                "x",
                rank=1,
                dtypes=tuple(d.name for d in dtypes_in_domain(Contract.FULL)),
                layouts=(PartitionSpec(DATA_AXIS),),
                placements=("layouts", NUMPY),
                # Each dtype's whole finite range, extremes and subnormals: with NaN or infinite
                # components, 2 * x and x + x differ for complex numbers, and full accepts both,
                # where one oracle names one.
                values={"allow_nan": False, "allow_infinity": False},
            )
        ],
        mesh_axes=(DATA_AXIS,),
        out=PartitionSpec(DATA_AXIS),
        oracle=_doubled,
        rtol=0.0,
        atol=0.0,
        raises=ValueError,
        max_side=64,
    )
