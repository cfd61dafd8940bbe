"""The public assertions' tolerances, pytrees, PartitionSpecs and compile counting (issue 21).

Each argument and assertion is shown to pass a right answer and to fail a
wrong one with the ``expected / got / hint`` message; a misused argument is
one ``TypeError`` naming it.  ``tests/test_kit_library.py`` keeps the older
single-array cases.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from conformance._src.inputs.case import make_mesh
from conformance._src.library import assertions as library
from conformance.assertions import (
    DEFAULT_TOLERANCES,
    AssertionFailed,
    assert_compiles_at_most,
    assert_compiles_once,
    assert_input_intact,
    assert_jit_shardings,
    assert_layout,
    assert_shards,
    assert_values_close,
    assert_values_equal,
    compiles,
    flush_subnormals,
)
from tests.kit_process import child_env
from tests.test_kit_library import _fails, mesh_2x4


def mesh_8() -> Mesh:
    return make_mesh(list(range(8)), (8,), ("x",))


def softmax(x: np.ndarray) -> np.ndarray:
    return np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1))


def one_ulp_up(a: np.ndarray, index: tuple[int, ...]) -> np.ndarray:
    out = a.copy()
    out[index] = np.nextafter(out[index], np.inf, dtype=out.dtype)
    return out


# ---------------------------------------------------------------------------
# Tolerances


def test_default_tolerances_are_jax_test_utilities_table() -> None:
    assert DEFAULT_TOLERANCES["float64"] == 1e-15 and DEFAULT_TOLERANCES["float32"] == 1e-6
    assert DEFAULT_TOLERANCES["float16"] == 1e-3 and DEFAULT_TOLERANCES["bfloat16"] == 1e-2
    assert DEFAULT_TOLERANCES["complex64"] == 1e-6 and DEFAULT_TOLERANCES["complex128"] == 1e-15
    assert DEFAULT_TOLERANCES["float8_e4m3fn"] == DEFAULT_TOLERANCES["float8_e5m2"] == 1e-1
    assert all(DEFAULT_TOLERANCES[t] == 0 for t in ("bool", "int8", "int64", "uint32", "int4"))
    with pytest.raises(TypeError):
        DEFAULT_TOLERANCES["float32"] = 1.0  # type: ignore[index]


def test_a_one_ulp_softmax_difference_is_close_but_not_equal_and_not_blamed_on_shards() -> None:
    x = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)
    expected = softmax(x)
    got = one_ulp_up(expected, (1, 3))
    assert_values_close(got, expected)  # float32's defaults
    failure = _fails(
        r"1 of 64 elements of the result differ \(the first at \[1, 3\]\)", assert_values_equal, got, expected
    )
    assert failure.kind == "values", failure
    assert "within 1 ulp" in (failure.hint or "") and "assert_values_close" in (failure.hint or ""), failure
    assert "shard" not in str(failure), failure
    # The same on a sharded array: one element off by rounding is no shard's fault.
    sharded = jax.device_put(got, NamedSharding(mesh_2x4(), P("rows", "cols")))
    assert "shard" not in str(_fails("differ", assert_values_equal, sharded, expected)).lower()


def test_assert_values_close_names_the_worst_element_its_errors_ulp_and_tolerance() -> None:
    expected = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    got = expected.copy()
    got[1] = 2.001  # out by 5e-4 relative
    got[3] = 8.5  # out by 6e-2 relative: the worst
    failure = _fails(
        r"2 of 4 elements of the result are not within the tolerance \(the worst at \[3\]\)",
        assert_values_close,
        got,
        expected,
    )
    assert failure.kind == "close", failure
    assert failure.expected == (
        "result[3] = 8.0 (0x41000000), within rtol=1e-06, atol=1e-06 (float32's defaults), "
        "its bound 9e-06 = atol + rtol * |expected|"
    ), failure
    assert failure.got == (
        "result[3] = 8.5 (0x41080000): absolute error 0.5, relative error 0.0625, 524288 ulp"
    ), failure
    assert "further off than rounding" in (failure.hint or "") and "shard" not in str(failure), failure
    assert_values_close(got, expected, rtol=0.1)
    given = _fails("not within", assert_values_close, got, expected, rtol=1e-3)
    assert "rtol=0.001, atol=1e-06 (atol: float32's default)" in given.expected, given
    assert (
        "(as given)" in _fails("not within", assert_values_close, got, expected, rtol=1e-3, atol=0).expected
    )


def test_a_few_ulp_out_of_a_tight_tolerance_suggest_a_looser_one() -> None:
    expected = np.array([1.0, 3.0], np.float16)
    got = one_ulp_up(one_ulp_up(expected, (1,)), (1,))  # 2 ulp
    failure = _fails("not within", assert_values_close, got, expected, rtol=0.0, atol=0.0)
    assert ", 2 ulp" in failure.got, failure
    assert "within 2 ulp" in (failure.hint or "") and "rtol=" in (failure.hint or ""), failure
    assert_values_close(got, expected)  # float16's default 1e-3 accepts them


def test_closeness_rules_for_nan_infinity_zero_sign_and_subnormals() -> None:
    f32 = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], np.float32)
    assert_values_close(np.array([-np.nan, np.inf, -np.inf, 0.0, 0.0], np.float32), f32)
    assert_values_close(np.array([-np.nan, np.inf, -np.inf, 0.0, 0.0], np.float32), f32, rtol=0, atol=0)
    _fails("not within", assert_values_close, np.array([1, np.inf, -np.inf, 0, 0], np.float32), f32, rtol=1)
    nan = _fails(
        "not within", assert_values_close, np.array([np.nan, -np.inf, -np.inf, 0, 0], np.float32), f32
    )
    assert "absolute error inf" in nan.got and "NaN or an infinity" in (nan.hint or ""), nan
    # A zero matches a subnormal only with flush (and a tolerance that does not reach it).
    _fails("not within", assert_values_close, np.zeros(1, np.float32), f32[4:], rtol=0, atol=0, flush=False)
    _fails("not within", assert_values_close, -np.zeros(1, np.float32), f32[4:], rtol=0, atol=0)


def test_integers_are_exact_by_default_and_take_a_tolerance() -> None:
    expected = np.array([1, 2, 3], np.int32)
    got = np.array([1, 2, 5], np.int32)
    failure = _fails(r"1 of 3 .* \(the worst at \[2\]\)", assert_values_close, got, expected)
    assert failure.got == "result[2] = 5: absolute error 2, relative error 0.667, 2 ulp", failure
    assert "rtol=0, atol=0 (int32's defaults)" in failure.expected, failure
    assert_values_close(got, expected, atol=2)
    extremes = np.array([np.iinfo(np.int64).min], np.int64)
    _fails("not within", assert_values_close, -extremes - 1, extremes, atol=1e18)  # no overflow in |a - b|


def test_complex_numbers_compare_on_the_modulus_of_the_difference() -> None:
    expected = np.array([3 + 4j], np.complex64)
    assert_values_close(
        np.array([3 + 4.0004j], np.complex64), expected, rtol=1e-4, atol=0
    )  # |d| = 4e-4 <= 5e-4
    failure = _fails(
        "not within",
        assert_values_close,
        np.array([3.0004 + 4.0004j], np.complex64),
        expected,
        rtol=1e-4,
        atol=0,
    )  # |d| = 5.7e-4 > 5e-4, though each component is within
    assert "relative error 0.000113" in failure.got, failure


def test_alternatives_and_pytrees_in_assert_values_close() -> None:
    x = np.array([1e-39, 2.0], np.float32)  # a subnormal input, which XLA on CPU flushes
    got = 3 * flush_subnormals(x)  # [0, 6]
    exact = dict(rtol=0.0, atol=0.0, flush=False)
    _fails("1 of 2 elements", assert_values_close, got, 3 * x, **exact)
    assert_values_close(got, 3 * x, alternatives=[3 * flush_subnormals(x)], **exact)
    tree = {"w": [x, got]}
    assert_values_close(tree, {"w": [x, 3 * x]}, alternatives=[{"w": [x, got]}], **exact)
    failure = _fails(r"result\['w'\]\[0\]", assert_values_close, {"w": [x + 1]}, {"w": [x]})
    assert failure.expected.startswith("result['w'][0][0] = "), failure


def test_assert_values_equal_with_a_tolerance_is_close() -> None:
    expected = np.array([1.0, 2.0], np.float32)
    got = one_ulp_up(expected, (0,))
    _fails("differ", assert_values_equal, got, expected)
    assert_values_equal(got, expected, rtol=1e-6)
    assert _fails("not within", assert_values_equal, got, expected, atol=1e-9).kind == "close"


def test_one_byte_floats_show_their_values_and_ulp() -> None:
    f8 = ml_dtypes.float8_e4m3fn
    failure = _fails("not within", assert_values_close, np.array([2.0], f8), np.array([2.5], f8))
    assert failure.expected.startswith("result[0] = 2.5 (0x42), within rtol=0.1"), failure
    assert failure.got.endswith(", 2 ulp"), failure


# ---------------------------------------------------------------------------
# Hints about sharding: only where the wrong elements line up with the shards


def test_a_failure_confined_to_one_shard_names_that_shard_and_its_device() -> None:
    target = NamedSharding(mesh_2x4(), P("rows", "cols"))
    got = jax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8), target)
    expected = np.arange(64, dtype=np.float32).reshape(8, 8)
    expected[4:8, 2:4] += 1  # the block of device 5
    failure = _fails("8 of 64 elements", assert_values_equal, got, expected)
    assert "wrong elements in 1 of the 8 shards" in (failure.hint or ""), failure
    assert "[4:8, 2:4] on device(s) [5]" in (failure.hint or ""), failure
    close = _fails("not within", assert_values_close, got, expected)
    assert "[4:8, 2:4] on device(s) [5]" in (close.hint or ""), close


def test_wrong_elements_on_shard_edges_name_the_boundaries() -> None:
    got = jax.device_put(np.arange(32, dtype=np.float32), NamedSharding(mesh_8(), P("x")))
    expected = np.arange(32, dtype=np.float32)
    expected[[3, 4, 12]] += 1  # last of shard 0, first of shard 1, first of shard 3
    failure = _fails("3 of 32", assert_values_equal, got, expected)
    hint = failure.hint or ""
    assert "first or last index of a shard along dimension 0" in hint and "devices [0, 1, 3]" in hint, failure
    scattered = np.arange(32, dtype=np.float32)
    scattered[[1, 6, 13]] += 1  # inside shards, a quarter of each: named, but not on the edges
    hint = _fails("3 of 32", assert_values_equal, got, scattered).hint or ""
    assert "wrong elements in 3 of the 8 shards" in hint and "first or last index" not in hint, hint


# ---------------------------------------------------------------------------
# Pytrees


def test_a_tuple_is_not_a_stacked_array() -> None:
    x = np.arange(3.0)
    failure = _fails("structure", assert_values_equal, (x, x), np.stack([x, x]))
    assert failure.kind == "structure", failure
    assert "PyTreeDef((*, *))" in failure.got and "PyTreeDef(*)" in failure.expected, failure
    assert "single leaf" in (failure.hint or ""), failure
    _fails("structure", assert_values_equal, np.stack([x, x]), (x, x))
    _fails("structure", assert_values_equal, [x], (x,))
    assert "other containers" in (_fails("structure", assert_values_close, [x], (x,)).hint or "")


def test_dicts_are_compared_leaf_by_leaf_and_a_failure_names_the_leaf() -> None:
    w0, w1, b = np.arange(4.0), np.ones((2, 2), np.float32), np.int8(3)
    assert_values_equal({"w": (w0, w1), "b": b}, {"w": (w0.copy(), w1.copy()), "b": np.int8(3)})
    failure = _fails(
        r"1 of 4 elements of the result\['w'\]\[0\] differ",
        assert_values_equal,
        {"w": (w0 + np.eye(4)[2], w1), "b": b},
        {"w": (w0, w1), "b": b},
    )
    assert failure.expected == "result['w'][0][2] = 2.0 (0x4000000000000000)", failure
    missing = _fails("structure", assert_values_equal, {"w": (w0, w1)}, {"w": (w0, w1), "b": b})
    assert "expected has result['b'], which the result lacks" in (missing.hint or ""), missing
    both = _fails(
        r"result\['b'\] differ \(and 1 more leaf fails: result\['w'\]\[0\]\)",
        assert_values_equal,
        {"w": (w0 + 1, w1), "b": np.int8(4)},
        {"w": (w0, w1), "b": b},
    )
    assert both.expected == "result['b'] = 3", both
    assert both.kind == "values", both
    with pytest.raises(ValueError, match=r"alternatives\[0\] has the structure"):
        assert_values_equal({"w": w0}, {"w": w0}, alternatives=[w0])


def test_assert_input_intact_on_a_pytree_names_the_changed_leaf() -> None:
    x = {"a": np.arange(3.0), "b": [np.zeros(2, np.int32)]}
    before = jax.tree_util.tree_map(np.array, x)
    assert_input_intact(before, x)
    x["b"][0][1] = 7
    failure = _fails(r"the caller's x\['b'\]\[0\] was changed", assert_input_intact, before, x)
    assert failure.expected == "x['b'][0][1] = 0", failure
    _fails("structure", assert_input_intact, before, (x["a"],))


# ---------------------------------------------------------------------------
# Layouts: pytrees of shardings, PartitionSpecs on the context's mesh


def test_assert_layout_takes_a_pytree_of_shardings() -> None:
    mesh = mesh_2x4()
    rows, both = NamedSharding(mesh, P("rows")), NamedSharding(mesh, P("rows", "cols"))
    w = jax.device_put(np.zeros((4, 8), np.float32), both)
    b = jax.device_put(np.zeros((4,), np.float32), rows)
    assert_layout({"w": w, "b": b}, {"w": both, "b": rows})
    assert_layout({"w": w, "b": b}, {"w": both, "b": None})  # None: any layout
    assert_layout((w, w), both)  # one sharding for every leaf
    assert_shards({"w": w, "b": b}, {"w": both, "b": rows})
    failure = _fails(
        r"the result\['w'\] does not have the requested layout",
        assert_layout,
        {"w": w, "b": b},
        {"w": rows, "b": rows},
    )
    assert failure.kind == "layout", failure
    assert _fails("structure", assert_layout, {"w": w, "b": b}, {"w": both}).kind == "structure"
    rank = _fails("fewer dimensions", assert_layout, {"w": w, "b": b}, {"w": both, "b": both})
    assert "result['b']" in rank.summary and rank.got == "an array of shape (4,)", rank
    assert "result[1] is not a jax.Array" in str(
        _fails("not a jax.Array", assert_layout, (w, np.zeros(3)), both)
    )
    _fails("not a jax.Array", assert_layout, None, both)


def test_a_partition_spec_takes_the_mesh_of_the_context() -> None:
    mesh = mesh_2x4()
    target = NamedSharding(mesh, P("rows", "cols"))
    y = jax.device_put(np.zeros((4, 8), np.float32), target)
    with jax.set_mesh(mesh):
        assert_layout(y, P("rows", "cols"))
        assert_shards(y, P("rows", "cols"))
        assert_layout({"w": y, "b": y}, {"w": P("rows", "cols"), "b": None})
        failure = _fails("requested layout", assert_layout, y, P("rows"))
        assert (
            "P('rows'))" in failure.expected
            and "mesh_from_ids([[0, 1, 2, 3], [4, 5, 6, 7]]" in failure.expected
        )
        good = jax.jit(lambda v: v + 1, in_shardings=target, out_shardings=target)
        assert_jit_shardings(good, y, in_shardings=P("rows", "cols"), out_shardings=P("rows", "cols"))
        assert_jit_shardings(good, y, in_shardings=[P("rows", "cols")], out_shardings=[P("rows", "cols")])
        _fails(
            "not with the given", assert_jit_shardings, good, y, in_shardings=None, out_shardings=P("rows")
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # `with mesh:` is deprecated in newer JAX
        with mesh:
            assert_layout(y, P("rows", "cols"))


def test_a_jit_that_only_placed_a_result_computed_before_it_fails() -> None:
    target = NamedSharding(mesh_2x4(), P("rows", "cols"))
    x = jax.device_put(np.arange(32, dtype=np.float32).reshape(4, 8), target)
    place = jax.jit(lambda v: v, in_shardings=target, out_shardings=target)
    add = jax.jit(lambda v, w: v + w, in_shardings=target, out_shardings=target)
    failure = _fails("only placed it", assert_jit_shardings, lambda v: place(np.asarray(v) * 2), x,
                     in_shardings=target, out_shardings=target)  # fmt: skip
    assert failure.kind == "computed-before-jit" and "none of the arguments" in failure.got, failure
    # Computed from the arguments: by the jit itself, by jits before it (an eager op runs as one),
    # from a NumPy copy or another placement of an argument, or given something of another shape
    # (unknown: passes).
    doubled = jax.jit(lambda v: v * 2)
    flat = jax.jit(lambda v: (v * 2).reshape(4, 8), out_shardings=target)
    for fine in (
        lambda v: add(v, v),
        lambda v: place(doubled(v)),
        lambda v: place(v * 2),
        lambda v: add(np.asarray(v), jnp.array(np.asarray(v))),
        lambda v: flat(np.asarray(v).ravel()),
        lambda v: add(v, np.full((4, 8), 2, np.float32)),
    ):
        assert_jit_shardings(fine, x, in_shardings=None, out_shardings=target)


def test_a_partition_spec_without_a_mesh_is_one_clear_type_error() -> None:
    y = jax.device_put(np.zeros((4, 8), np.float32), NamedSharding(mesh_2x4(), P("rows", "cols")))
    fix = r"NamedSharding\(mesh, P\('rows', 'cols'\)\), or call under jax.set_mesh\(mesh\)"
    with pytest.raises(TypeError, match=r"^target=P\('rows', 'cols'\) is a PartitionSpec.*" + fix):
        assert_layout(y, P("rows", "cols"))
    with pytest.raises(TypeError, match=r"^target\['w'\]=P\('rows', 'cols'\) is a PartitionSpec"):
        assert_shards({"w": y}, {"w": P("rows", "cols")})
    with pytest.raises(TypeError, match=r"^out_shardings\[0\]=P\('rows', 'cols'\) is a PartitionSpec"):
        assert_jit_shardings(lambda v: v, y, in_shardings=None, out_shardings=[P("rows", "cols")])


def test_the_kits_single_array_forms_still_refuse_a_tuple() -> None:
    target = NamedSharding(mesh_2x4(), P("rows", "cols"))
    y = jax.device_put(np.zeros((4, 8), np.float32), target)
    library.assert_array_layout(y, target, shards=False)
    library.assert_array_shards(y, target)
    for check in (library.assert_array_layout, library.assert_array_shards):
        assert _fails("not a jax.Array", check, (y,), target).kind == "not-an-array"


# ---------------------------------------------------------------------------
# Misuse


MISUSE = [
    (lambda: assert_values_close(np.ones(2), np.ones(2), rtol=-1), r"^rtol=-1 must be a finite float >= 0"),
    (lambda: assert_values_close(np.ones(2), np.ones(2), atol="0.1"), r"^atol='0.1' must be a finite float"),
    (lambda: assert_values_equal(np.ones(2), np.ones(2), rtol=float("nan")), r"^rtol=nan must be"),
    (lambda: assert_values_equal(np.ones(2), np.ones(2), atol=True), r"^atol=True must be"),
    (
        lambda: assert_values_close(np.ones(2, np.longdouble), np.ones(2, np.longdouble)),
        "no default tolerance",
    ),
    (
        lambda: assert_layout(jnp.ones(2), "x"),
        r"^target='x' must be a jax.sharding.Sharding, a PartitionSpec",
    ),
    (lambda: assert_layout(jnp.ones(2), None), r"^target=None must be"),
    (lambda: assert_shards((jnp.ones(2),), (3,)), r"^target\[0\]=3 must be"),
    (
        lambda: assert_jit_shardings(lambda v: v, jnp.ones(2), in_shardings="x", out_shardings=None),
        r"^in_shardings='x' must be",
    ),
    (
        lambda: assert_jit_shardings(lambda v: v, jnp.ones(2), in_shardings=None, out_shardings=None),
        r"^out_shardings=None must be",
    ),
    (lambda: assert_compiles_at_most(-1).__enter__(), r"^n=-1 must be an int >= 0"),
    (lambda: assert_compiles_at_most(1.5).__enter__(), r"^n=1.5 must be an int >= 0"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("misuse", "message"), MISUSE, ids=range(len(MISUSE)))
def test_misuse_is_one_type_error_naming_the_argument(misuse: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        misuse()


# ---------------------------------------------------------------------------
# Compiles


def test_compiles_counts_the_blocks_compiles_and_at_most_bounds_them() -> None:
    with compiles() as seen:
        f = jax.jit(lambda v: v * 5 - 1)
        f(np.arange(3.0))
        f(np.arange(3.0))
        assert seen.count == 1, seen
    assert seen.count == 1 and len(seen.names) == 1, seen
    jax.jit(lambda v: v + 7)(np.arange(2.0))  # after the block: not counted
    assert seen.count == 1, seen
    with assert_compiles_at_most(0):
        f(np.arange(3.0))
    with assert_compiles_at_most(1):
        jax.jit(lambda v: v * 9)(np.arange(2.0))

    def two_new_jits() -> None:
        with assert_compiles_at_most(1, what="the training step"):
            jax.jit(lambda v: v * 11)(np.arange(2.0))
            jax.jit(lambda v: v * 13)(np.arange(2.0))

    failure = _fails("the training step compiled more often than allowed", two_new_jits)
    assert failure.kind == "recompiled" and failure.got.startswith("2 backend compile(s): jit("), failure
    with pytest.raises(ZeroDivisionError), assert_compiles_at_most(0):  # the block's own error stays
        jax.jit(lambda v: v * 17)(np.arange(2.0))
        raise ZeroDivisionError


def test_the_second_call_gets_fresh_equal_copies_so_an_identity_cache_fails() -> None:
    target = NamedSharding(mesh_8(), P("x"))
    arrays = {
        "sharded": jax.device_put(np.arange(16.0, dtype=np.float32), target),
        "one device": jax.device_put(np.arange(4, dtype=np.int32), jax.devices()[3]),
        "uncommitted": jnp.arange(5.0),
    }
    seen: list[tuple[Any, ...]] = []

    def record(x: Any, host: np.ndarray) -> Any:
        seen.append((x, host, x.sharding, x.committed, np.asarray(x)))
        return kept(x)

    kept = jax.jit(lambda v: v * 2)
    for name, x in arrays.items():
        seen.clear()
        host = np.arange(3)
        assert_compiles_once(record, x, host)
        (first, host1, s1, c1, v1), (second, host2, s2, c2, v2) = seen
        assert first is x and second is not x and host2 is not host1, name
        assert s2 == s1 and c2 == c1 and np.array_equal(v1, v2) and v2.dtype == v1.dtype, name
    cache: dict[int, Any] = {}

    def by_identity(x: Any) -> Any:
        if id(x) not in cache:
            cache[id(x)] = jax.jit(lambda v: v * 3)
        return cache[id(x)](x)

    failure = _fails("compiled again", assert_compiles_once, by_identity, arrays["sharded"])
    assert failure.kind == "recompiled" and "identity" in (failure.hint or ""), failure


def test_a_donating_function_fails_cleanly_before_a_second_call() -> None:
    donating = jax.jit(lambda v: v * 2, donate_argnums=0)
    x = jax.device_put(np.arange(16.0, dtype=np.float32), NamedSharding(mesh_8(), P("x")))
    failure = _fails(
        r"the first call deleted argument 0 \(buffer donation\)", assert_compiles_once, donating, x
    )
    assert failure.kind == "donated" and "compiles()" in (failure.hint or ""), failure
    nested = jax.jit(lambda a, b: b["q"][0] * a, donate_argnums=1)
    y = jax.device_put(np.arange(16.0, dtype=np.float32), NamedSharding(mesh_8(), P("x")))
    failure = _fails(
        r"deleted argument b \(its leaf \['q'\]\[0\]\)", assert_compiles_once, nested, 2.0, b={"q": [y]}
    )
    # Counted over fresh arrays instead, it compiles once.
    fresh = lambda: jax.device_put(np.arange(16.0, dtype=np.float32), NamedSharding(mesh_8(), P("x")))  # noqa: E731
    donating(fresh())
    with assert_compiles_at_most(0):
        donating(fresh())


DONATING_TEST = """
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from conformance.assertions import assert_compiles_once


def test_donating_function_compiles_once():
    mesh = jax.make_mesh((8,), ("x",))
    x = jax.device_put(np.arange(32.0, dtype=np.float32), NamedSharding(mesh, P("x")))
    assert x.committed and len(x.addressable_shards) == 8
    assert_compiles_once(jax.jit(lambda v: v * 2, donate_argnums=0), x)
"""


def test_a_donating_function_in_a_real_pytest_run_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    # JAX 0.10.2 segfaults when a donated (deleted) sharded array is passed again.
    path = tmp_path / "test_donating.py"
    path.write_text(textwrap.dedent(DONATING_TEST))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(path), "-p", "no:cacheprovider", "--host-devices", "8", "-q"],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 1, (run.returncode, output[-4000:])
    assert "1 failed" in run.stdout, output[-4000:]
    assert "the first call deleted argument 0 (buffer donation)" in run.stdout, output[-4000:]


# ---------------------------------------------------------------------------
# Hints that say what docs/assertions.md promises (issue 42, item 5)


def _line(size: int) -> Mesh:
    return Mesh(np.array(jax.devices()[:size]), ("model",))


def test_a_pmean_where_a_psum_belongs_is_named_on_a_replicated_result() -> None:
    """Half the expected value on a replicated result over an axis of 2: the hint names the axis
    and the pmean, as it does for a split result."""
    expect = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    halved = jax.device_put(expect / 2, NamedSharding(_line(2), P()))
    with pytest.raises(AssertionFailed) as failure:
        assert_values_close(halved, expect)
    hint = failure.value.hint or ""
    assert "1/2, one over the size of mesh axis 'model'" in hint and "pmean" in hint, hint
    assert "replicated" in hint, hint


def test_an_offset_on_every_shard_does_not_say_some_devices() -> None:
    expect = np.arange(8, dtype=np.float32)
    shifted = jax.device_put(expect + 1.0, NamedSharding(_line(4), P("model")))
    with pytest.raises(AssertionFailed) as failure:
        assert_values_close(shifted, expect)
    hint = failure.value.hint or ""
    assert "no shard is right" in hint and "plus 1" in hint, hint
    assert "some devices only" not in hint, hint


@pytest.mark.parametrize(
    "got_spec, want_spec, said",
    [
        (P(), P("model"), "each holds the whole result (replicated), where the target splits it"),
        (P("model"), P(), "the result is split, where the target has every device hold the whole"),
        (P("model", None), P(None, "model"), "split another way"),
    ],
    ids=["replicated-for-split", "split-for-replicated", "split-otherwise"],
)
def test_a_layout_on_the_right_devices_says_how_it_differs(got_spec: P, want_spec: P, said: str) -> None:
    mesh = _line(4)
    got = jax.device_put(np.zeros((4, 4), np.float32), NamedSharding(mesh, got_spec))
    with pytest.raises(AssertionFailed) as failure:
        assert_layout(got, NamedSharding(mesh, want_spec))
    assert said in (failure.value.hint or ""), failure.value.hint
