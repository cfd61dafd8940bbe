"""What a model team tests (issue 28): tolerances per element and per leaf, a diagnosis that
survives shrinking, jit shardings that differ in device order, meshes shown by their device ids,
replicas compared, small failures printed whole.

Each test failed on the library before issue 28 (the point it answers is named above it).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from conformance._src.inputs.case import make_mesh
from conformance.assertions import (
    assert_jit_shardings,
    assert_layout,
    assert_replicas_agree,
    assert_values_close,
    assert_values_equal,
)
from conformance.devices import mesh_from_ids
from tests.test_kit_library import _fails


def layer_norm(x: np.ndarray, eps: float = 1e-5) -> dict[str, np.ndarray]:
    wide = x.astype(np.float64)
    mean = wide.mean(-1, keepdims=True)
    var = wide.var(-1, keepdims=True)
    return {
        "y": ((wide - mean) / np.sqrt(var + eps)).astype(x.dtype),
        "mean": mean[:, 0].astype(x.dtype),
        "var": var[:, 0].astype(x.dtype),
    }


# ---------------------------------------------------------------------------
# 1. Tolerances per element and per leaf


def test_a_tolerance_array_broadcasts_against_the_leaf_and_each_element_has_its_own_bound() -> None:
    want = np.array([1.0, 2.0, 3.0], np.float32)
    got = want + np.array([0.0, 0.1, 0.5], np.float32)
    assert_values_close(got, want, atol=np.array([0, 0.2, 0.6]), rtol=0)
    failure = _fails(
        r"1 of 3 elements .* \(the worst at \[2\]\)",
        assert_values_close,
        got,
        want,
        atol=np.array([0, 0.2, 0.4]),
        rtol=0,
    )
    assert "within rtol=0, atol=0.4" in failure.expected and "this element's own" in failure.expected, failure
    assert "its bound 0.4" in failure.expected, failure


def _layer_norm_f32(x: Any, eps_inside: bool = True) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / (jax.numpy.sqrt(var + 1e-5) if eps_inside else jax.numpy.sqrt(var) + 1e-5)


def test_a_bound_per_row_catches_a_row_that_one_scalar_for_the_worst_row_lets_through() -> None:
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(4, 16)) * 0.1).astype(np.float32)
    x[0] = 1000 + 0.01 * rng.normal(size=16)  # a large offset, a tiny spread: float32 loses digits here
    want = layer_norm(x)["y"]
    wide = x.astype(np.float64)
    # A correct float32 layer norm is off by about eps32 * max|x| / sqrt(var + eps), row by row.
    row_bound = (
        64 * 2.0**-23 * np.abs(wide).max(-1, keepdims=True) / np.sqrt(wide.var(-1, keepdims=True) + 1e-5)
    )
    right = np.asarray(jax.jit(_layer_norm_f32)(x))
    broken = np.asarray(jax.jit(lambda v: _layer_norm_f32(v, eps_inside=False))(x))  # eps outside the sqrt
    assert_values_close(right, want, rtol=0, atol=row_bound)  # shape (4, 1): a bound per row
    assert_values_close(right, want, rtol=0, atol=float(row_bound.max()))  # one scalar for the worst row
    assert_values_close(broken, want, rtol=0, atol=float(row_bound.max()))  # ... lets the bug through
    failure = _fails(
        r"not within the tolerance \(the worst at \[[123], ",
        assert_values_close,
        broken,
        want,
        rtol=0,
        atol=row_bound,
    )
    assert "this element's own" in failure.expected, failure


def test_a_pytree_of_tolerances_names_the_leaf_and_where_its_tolerance_came_from() -> None:
    x = np.random.default_rng(1).normal(size=(4, 8)).astype(np.float32)
    want = layer_norm(x)
    got = {**want, "y": want["y"] * np.float32(1.0005)}
    assert_values_close(got, want, rtol={"y": 1e-3})  # "mean" and "var": float32's defaults
    failure = _fails(r"result\['y'\]", assert_values_close, got, want, rtol={"y": 1e-4, "var": 1e-3})
    assert failure.expected.startswith("result['y']["), failure
    assert "rtol from rtol['y']" in failure.expected and "atol: float32's default" in failure.expected, (
        failure
    )
    with pytest.raises(TypeError, match=r"rtol\['y'\] has shape \(3,\), which does not broadcast"):
        assert_values_close(got, want, rtol={"y": np.ones(3)})
    with pytest.raises(TypeError, match=r"rtol names 'z'"):
        assert_values_close(got, want, rtol={"z": 1e-3})
    with pytest.raises(TypeError, match=r"atol\[1\] = -1.0"):
        assert_values_close(want["mean"], want["mean"], atol=np.array([0.0, -1.0, 0.0, 0.0]))


def test_assert_values_equal_takes_the_same_forms_and_compares_the_rest_bit_for_bit() -> None:
    want = {"a": np.array([1.0, 2.0], np.float32), "b": np.array([1.0], np.float32)}
    got = {"a": np.array([1.0, 2.1], np.float32), "b": np.array([1.0], np.float32)}
    assert_values_equal(got, want, atol={"a": np.array([0.0, 0.2])})
    failure = _fails(
        "differ", assert_values_equal, {**got, "b": np.array([1.5], np.float32)}, want, atol={"a": 0.2}
    )
    assert failure.kind == "values" and "result['b']" in failure.expected, failure


# ---------------------------------------------------------------------------
# 2. A diagnosis that survives shrinking: one element per shard


def mesh_4() -> Mesh:
    return make_mesh([0, 1, 2, 3], (4,), ("model",))


def test_one_element_per_shard_scaled_by_an_axis_size_is_blamed_on_a_collective_not_precision() -> None:
    want = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    got = jax.device_put(want * 4, NamedSharding(mesh_4(), P("model")))  # a psum where a pmean belongs
    for assertion in (assert_values_close, assert_values_equal):
        failure = _fails("4 of 4", assertion, got, want)
        hint = failure.hint or ""
        assert "wrong elements in 4 of the 4 shards" in hint and "[0:1] on device(s) [0] (1 of 1)" in hint, (
            hint
        )
        assert "times 4, the size of mesh axis 'model'" in hint and "precision" not in hint, hint


def test_one_wrong_shard_among_right_ones_is_named_with_the_right_ones() -> None:
    want = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], np.float32)
    wrong = want.copy()
    wrong[2:3] /= 4  # one shard divided by the axis size: a pmean where a psum belongs
    got = jax.device_put(wrong, NamedSharding(mesh_4(), P("model", None)))
    hint = _fails("2 of 8", assert_values_close, got, want).hint or ""
    assert "wrong elements in 1 of the 4 shards" in hint and "[2:3, 0:2] on device(s) [2] (2 of 2)" in hint, (
        hint
    )
    assert "right: [0:1, 0:2] on device(s) [0]" in hint and "1/4" in hint, hint
    offset = want.copy()
    offset[1:2] += 10  # a carry from the wrong shard
    hint = _fails("2 of 8", assert_values_close, jax.device_put(offset, got.sharding), want).hint or ""
    assert "plus 10" in hint and "[1:2, 0:2] on device(s) [1]" in hint, hint


def test_precision_is_blamed_only_where_rounding_explains_the_error() -> None:
    x = np.random.default_rng(2).normal(size=(64,)).astype(np.float32)
    narrow = x.astype(jax.numpy.bfloat16).astype(np.float32)
    hint = _fails("not within", assert_values_close, narrow, x).hint or ""
    assert "every wrong element is a bfloat16 value" in hint and "runs in bfloat16" in hint, hint
    hint = _fails("not within", assert_values_close, x * 2, x).hint or ""
    assert "not a matter of precision" in hint, hint
    # Off by 0.04% as a wrong formula is (eps outside a sqrt), in float32 values: no precision blamed.
    formula = (x * np.float32(1.0004)).astype(np.float32)
    hint = _fails("not within", assert_values_close, formula, x).hint or ""
    assert "not a matter of precision" in hint and "bfloat16" not in hint, hint


# ---------------------------------------------------------------------------
# 3. assert_jit_shardings: device order, spec, no shardings given


def test_a_jit_whose_mesh_orders_the_devices_otherwise_shows_both_meshes_ids() -> None:
    mesh = mesh_from_ids([[0, 1], [2, 3]], ("data", "model"))
    remade = mesh_from_ids([[0, 2], [1, 3]], ("data", "model"))
    asked = NamedSharding(mesh, P("data", "model"))
    f = jax.jit(
        lambda v: v * 2,
        in_shardings=NamedSharding(remade, P("data", "model")),
        out_shardings=NamedSharding(remade, P("data", "model")),
    )
    x = jax.device_put(np.arange(16.0).reshape(4, 4), NamedSharding(remade, P("data", "model")))
    failure = _fails(
        "not with the given shardings", assert_jit_shardings, f, x, in_shardings=None, out_shardings=asked
    )
    assert failure.expected != failure.got, failure
    assert "[[0, 1], [2, 3]]" in failure.expected and "[[0, 2], [1, 3]]" in failure.got, failure
    hint = failure.hint or ""
    assert "in another order" in hint and "device_put" not in hint, hint


def test_a_replicated_output_where_a_split_one_is_asked_names_both_specs() -> None:
    mesh = mesh_from_ids([[0, 1], [2, 3]], ("data", "model"))
    f = jax.jit(
        lambda v: v * 2, in_shardings=NamedSharding(mesh, P("data")), out_shardings=NamedSharding(mesh, P())
    )
    x = np.arange(8.0).reshape(4, 2)
    failure = _fails(
        "not with the given shardings",
        assert_jit_shardings,
        f,
        x,
        in_shardings=None,
        out_shardings=NamedSharding(mesh, P("data")),
    )
    hint = failure.hint or ""
    assert "split by P(), the requested by P('data')" in hint and "device_put" not in hint, hint


def test_a_jit_given_no_out_shardings_is_told_to_pass_them() -> None:
    mesh = mesh_from_ids([0, 1, 2, 3], ("data",))
    s = NamedSharding(mesh, P("data"))
    f = jax.jit(lambda v: v.sum(keepdims=True) + v)
    x = jax.device_put(np.arange(8.0), s)
    hint = _fails(
        "not with the given shardings", assert_jit_shardings, f, x, in_shardings=s, out_shardings=s
    ).hint
    assert "the jit was given no" in (hint or "") and "device_put" in (hint or ""), hint


# ---------------------------------------------------------------------------
# 4. Meshes shown with their device ids, pasted back


def test_a_layout_failure_shows_meshes_that_rebuild_when_pasted_back() -> None:
    shuffled = mesh_from_ids([[3, 1], [0, 2]], ("data", "model"))
    target = NamedSharding(shuffled, P("data", "model"))
    y = jax.device_put(np.zeros((4, 4), np.float32), NamedSharding(shuffled, P("data")))
    failure = _fails("requested layout", assert_layout, y, target)
    shown = failure.expected.split("NamedSharding(", 1)[1].rsplit(", P(", 1)[0]
    assert eval(shown, {"mesh_from_ids": mesh_from_ids}) == shuffled, shown  # noqa: S307 -- our own text


# ---------------------------------------------------------------------------
# 5. Replicas compared


def _replicas_differ(mesh: Mesh) -> Any:
    def local(v: Any) -> Any:
        return v * (2 + (jax.lax.axis_index("model") > 0))  # device 0 doubles, the others triple

    return jax.shard_map(local, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)


def test_replicas_that_differ_pass_values_and_layout_and_fail_assert_replicas_agree() -> None:
    mesh = mesh_4()
    x = np.arange(4.0, dtype=np.float32)
    y = _replicas_differ(mesh)(x)
    assert_values_equal(y, 2 * x)  # reads device 0's copy
    assert_layout(y, NamedSharding(mesh, P()))
    failure = _fails(r"replicas of block \[0:4\] of the x\['y'\] differ", assert_replicas_agree, {"y": y})
    assert failure.kind == "replicas", failure
    assert "devices [0] agree, [1, 2, 3] do not" in failure.summary, failure
    assert "[0.0, 3.0, 6.0, 9.0]" in failure.got and "[0.0, 2.0, 4.0, 6.0]" in failure.expected, failure
    good = jax.shard_map(lambda v: v * 2, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)(x)
    assert_replicas_agree(good)
    assert_replicas_agree(jax.device_put(np.float32([np.nan, -0.0]), NamedSharding(mesh, P())))


# ---------------------------------------------------------------------------
# 7. A small failure printed whole, both arrays


def test_a_small_failure_prints_both_arrays_whole_as_numpy_does() -> None:
    got = np.array([[1, 2, 2]], np.int32)  # a cumulative sum missing the carry of one shard
    want = np.array([[1, 2, 3]], np.int32)
    for assertion in (assert_values_equal, assert_values_close):
        failure = _fails("1 of 3", assertion, got, want)
        assert failure.whole == ("[[1, 2, 2]]", "[[1, 2, 3]]"), failure
        assert "got (whole):" in str(failure) and "[[1, 2, 3]]" in str(failure), failure
    big = _fails(
        "1 of 200",
        assert_values_equal,
        np.r_[np.arange(199), 0],
        np.arange(200),
    )
    assert big.whole is None, big
