"""Assertions for sharded JAX code: plain functions, usable in any test framework.

Each raises ``AssertionFailed`` (an ``AssertionError``) whose message says what
was expected, what came and a hint, and names the failing element, shard or
jit::

    from conformance.assertions import assert_layout, assert_values_equal

    def test_scale(host_devices):
        mesh = jax.make_mesh((2, 4), ("rows", "cols"))
        target = NamedSharding(mesh, P("rows", "cols"))
        x = jax.device_put(np.arange(32.0).reshape(8, 4), target)
        y = scale(x)
        assert_values_equal(y, 3 * np.asarray(x))
        assert_layout(y, target)

Under pytest the assertions' own frames are hidden from tracebacks.  The
kit's ``pjit_double`` checks are built on these same functions.
"""

from conformance._src.library.assertions import (
    KINDS,
    AssertionFailed,
    assert_compiles_once,
    assert_input_intact,
    assert_jit_shardings,
    assert_layout,
    assert_shards,
    assert_values_equal,
    flush_subnormals,
    host_copy,
)

__all__ = [
    "assert_compiles_once",
    "assert_input_intact",
    "assert_jit_shardings",
    "assert_layout",
    "assert_shards",
    "assert_values_equal",
    "AssertionFailed",
    "flush_subnormals",
    "host_copy",
    "KINDS",
]
