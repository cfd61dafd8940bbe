"""Hypothesis strategies for testing sharded JAX code.

Public and importable for your own property tests.  For any sharded
function: ``meshes`` (any number of axes, any names, any subset and order of
the devices), ``partition_specs``, ``shardings``, ``sharded_arrays`` and
``values`` of any shape::

    from hypothesis import given
    from conformance import strategies as cst

    @given(cst.sharded_arrays(dtype="bfloat16", shape=(8, 4),
                              sharding=cst.shardings(shape=(8, 4))))
    def test_mine(x): ...

For ``pjit_double``-like functions (a vector, an optional mesh): ``lengths``,
``dtypes``, ``placements`` and ``cases`` (a ``Case`` builds its input with
``case.make_input()``).

Every strategy is a small keyword-argument function that checks its
arguments when called (``InvalidArgument``).  Meshes and arrays read
``jax.devices()`` when drawn, not when built, so building a strategy never
starts JAX's backend; too few devices is an ``InvalidArgument`` that says
how to get more (``pytest --host-devices N``).  So is a mesh strategy that
could draw only one-device meshes (JAX has one device) when the test did not
ask for one device itself (``max_size=1``, or ``devices=`` a list of one):
a test of sharding on one device passes whatever the layout.
"""

from conformance._src.library.strategies import (
    ARRAY_PLACEMENTS,
    MAX_LENGTH,
    cases,
    dtypes,
    lengths,
    meshes,
    partition_specs,
    placements,
    sharded_arrays,
    shardings,
    spec_divides,
    special_floats,
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
    "sharded_arrays",
    "shardings",
    "spec_divides",
    "special_floats",
    "values",
]
