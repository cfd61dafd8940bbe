"""Hypothesis strategies for testing sharded JAX code.

Public and importable for your own property tests.  For any sharded
function: ``meshes`` (any number of axes, any names, any subset and order of
the devices; ``with_axes=`` for meshes that have the axes a function splits
over), ``partition_specs``, ``shardings`` (any layout, or a fixed ``spec=``
over drawn meshes), ``shapes`` (shapes a layout divides), ``dtypes`` (any
JAX dtype by kind and width, x64-aware), ``sharded_arrays`` and ``values``
of any shape and dtype::

    from hypothesis import given
    from jax.sharding import PartitionSpec as P
    from conformance import strategies as cst

    @given(cst.sharded_arrays(dtype="bfloat16", sharding=cst.shardings(spec=P("batch", None)),
                              min_value=-10, max_value=10, allow_nan=False, allow_infinity=False))
    def test_mine(x): ...

``values`` and ``sharded_arrays`` draw over each dtype's whole range (NaN
payloads, infinities, subnormals, extremes) unless given the value controls
of ``hypothesis.extra.numpy.from_dtype``: ``min_value``, ``max_value``,
``allow_nan``, ``allow_infinity``, ``allow_subnormal``, or ``elements=`` a
strategy, and ``unique=True``.  ``structure=`` (a kind, or a sequence of
kinds) draws the inputs that break numerics by construction, every row
along ``axis`` one of them: ``"offset"`` (a large offset, a tiny spread: a
one-pass variance cancels), ``"huge-max"`` (a maximum whose ``exp``
overflows the dtype: a softmax without the max shift gives NaN),
``"mixed-magnitudes"`` (``L``, ``-L`` and values below ``L``'s ulp: a sum
in the dtype loses them).

Hypothesis prints a drawn mesh in the falsifying example as the call that
rebuilds it, ``mesh_from_ids([[3, 1], [0, 2]], ('data', 'model'))``
(``conformance.devices.mesh_from_ids``), and a drawn ``NamedSharding`` as
``NamedSharding(mesh_from_ids(...), P('data', None))``; an array of
``sharded_arrays`` notes its layout so under the example.

For ``pjit_double``-like functions (a vector, an optional mesh): ``lengths``,
``dtypes(contract=...)``, ``placements`` and ``cases`` (a ``Case`` builds its
input with ``case.make_input()``).  These belong to the kit's ``pjit_double``
contract and live beside it (``conformance/_src/inputs/strategies.py``); the
general ones above are the library's, which knows no contract
(``conformance/_src/library/``).  All are imported from here.

Every strategy is a small keyword-argument function that checks its
arguments when called (``InvalidArgument``, naming the argument at fault).
Meshes and arrays read ``jax.devices()`` when drawn, not when built, so
building a strategy never starts JAX's backend; too few devices is an
``InvalidArgument`` that says how to get more (``pytest --host-devices N``).
So is a mesh strategy that could draw only one-device meshes (JAX has one
device) when the test did not ask for one device itself (``max_size=1``, or
``devices=`` a list of one): a test of sharding on one device passes whatever
the layout.  So is a 64-bit dtype while ``jax_enable_x64`` is off, which JAX
would make 32-bit.
"""

from conformance._src.inputs.strategies import MAX_LENGTH, cases, dtypes, lengths, placements
from conformance._src.library.dtypes import special_floats
from conformance._src.library.strategies import (
    ARRAY_PLACEMENTS,
    meshes,
    partition_specs,
    shapes,
    sharded_arrays,
    shardings,
    spec_divides,
    values,
)

__all__ = [
    "ARRAY_PLACEMENTS",
    "cases",
    "dtypes",
    "lengths",
    "MAX_LENGTH",
    "meshes",
    "partition_specs",
    "placements",
    "shapes",
    "sharded_arrays",
    "shardings",
    "spec_divides",
    "special_floats",
    "values",
]
