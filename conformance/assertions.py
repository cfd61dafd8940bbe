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

The assertions:

* ``assert_values_equal(got, expected, *, rtol=0, atol=0, alternatives=(),
  flush=True, what="result")`` -- the same dtype, shape and values, bit for bit
  (any NaN matches any NaN; a zero of the same sign matches a subnormal);
* ``assert_values_close(got, expected, *, rtol=None, atol=None, ...)`` --
  within ``atol + rtol * |expected|``, ``None`` being the dtype's default from
  ``DEFAULT_TOLERANCES``; ``rtol`` and ``atol`` may be arrays that broadcast
  against the leaf (a bound per row) or pytrees of them; a failure names the
  worst element, its errors, its distance in ulp and its own bound, which
  shards hold wrong elements, and prints a small leaf whole;
* ``assert_layout(result, target, *, shards=True, what="result")`` and
  ``assert_shards(result, target, *, what="result")`` -- the sharding, and
  every shard on its device with its index ranges;
* ``assert_replicas_agree(x, *, what="x")`` -- every copy of every shard holds
  the same bits (a ``shard_map`` with ``check_vma=False`` may return replicas
  that differ);
* ``assert_jit_shardings(fn, *args, in_shardings=..., out_shardings=...,
  **kwargs)`` -- the output really came out of a ``jax.jit`` given those
  shardings;
* ``assert_compiles_once(fn, *args, **kwargs)`` -- a second call, on fresh
  copies of the arrays, compiles nothing; ``compiles()`` counts the compiles of
  a block, and ``assert_compiles_at_most(n)`` bounds them;
* ``assert_input_intact(before, x, *, what="x")`` -- the call neither deleted
  nor changed the caller's input;
* helpers: ``host_copy(array)``, ``flush_subnormals(x)``, ``KINDS`` (the
  ``kind`` of an ``AssertionFailed``), ``CompileCount``.

Every value and layout assertion takes pytrees: the structures must match
(kind ``"structure"``: a tuple is not a stacked array), each leaf is judged and
a failure names its path (``result['w'][0]``).  Wherever a layout is asked, a
``PartitionSpec`` stands for a ``NamedSharding`` on the mesh of the context
(``jax.set_mesh(mesh)``, ``with mesh:``)::

    with jax.set_mesh(mesh):
        assert_layout({"w": w, "b": b}, {"w": P("rows", None), "b": None})  # None: any

A misused argument (a negative tolerance, a target that is no layout, a
``PartitionSpec`` with no mesh in the context) raises one ``TypeError`` naming
it.  Under pytest the assertions' own frames are hidden from tracebacks.  The
kit's ``pjit_double`` checks are built on these same functions.
"""

from conformance._src.library.assertions import (
    DEFAULT_TOLERANCES,
    KINDS,
    AssertionFailed,
    CompileCount,
    assert_compiles_at_most,
    assert_compiles_once,
    assert_input_intact,
    assert_jit_shardings,
    assert_layout,
    assert_replicas_agree,
    assert_shards,
    assert_values_close,
    assert_values_equal,
    compiles,
    flush_subnormals,
    host_copy,
)

__all__ = [
    "assert_compiles_at_most",
    "assert_compiles_once",
    "assert_input_intact",
    "assert_jit_shardings",
    "assert_layout",
    "assert_replicas_agree",
    "assert_shards",
    "assert_values_close",
    "assert_values_equal",
    "AssertionFailed",
    "CompileCount",
    "compiles",
    "DEFAULT_TOLERANCES",
    "flush_subnormals",
    "host_copy",
    "KINDS",
]
