"""The public strategies' newer controls reach what they promise, and each misuse is refused by name.

Value controls (bounds, the NaN/infinity/subnormal flags, ``elements=``,
``unique=``) on ``values`` and ``sharded_arrays``; the general ``dtypes``
(kinds, sizes, x64); ``meshes(with_axes=...)``; ``shapes``; ``shardings(spec=...)``;
``partition_specs`` over drawn meshes; ``sharded_arrays`` without a shape; drawn meshes and
shardings printed by their device ids in the falsifying example; ``structure=``.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from conformance import strategies as cst
from conformance._src.inputs.case import make_mesh
from conformance._src.library import strategies as library_strategies
from conformance._src.library.dtypes import DTYPE_KINDS, X64_NAMES
from conformance._src.library.show import mesh_ids, mesh_text, sharding_text
from conformance._src.library.structure import STRUCTURES
from conformance.devices import mesh_from_ids
from tests.test_kit_strategies import collect, draw_once

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT8 = [np.dtype(getattr(jnp, name)) for name in DTYPE_KINDS["float8"]]
E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)


def mesh_2x4() -> Mesh:
    return make_mesh(list(range(8)), (2, 4), ("rows", "cols"))


def _as_float(a: np.ndarray) -> np.ndarray:
    """Real floats of any kind as float64 (NaN payloads of narrow kinds warn when cast)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(a).astype(np.float64)


def _parts(a: np.ndarray) -> np.ndarray:
    """A real array as float64; a complex one as its real and imaginary parts side by side."""
    if a.dtype.kind == "c":
        return np.concatenate([a.real.astype(np.float64).ravel(), a.imag.astype(np.float64).ravel()])
    return _as_float(a).ravel()


def _subnormal(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    part = np.dtype(f"float{dtype.itemsize * 4}") if dtype.kind == "c" else dtype
    tiny = float(ml_dtypes.finfo(part).smallest_normal)
    with np.errstate(invalid="ignore"):
        return (x != 0) & (np.abs(x) < tiny)


@pytest.fixture
def x64_on() -> Iterator[None]:
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", False)


# ---------------------------------------------------------------------------
# Value controls


BOUNDED = [np.dtype("float16"), BF16, np.dtype("float32"), np.dtype("float64"), E4M3FN, E5M2]


@pytest.mark.parametrize("dtype", [*BOUNDED, np.dtype("complex64")], ids=str)
def test_bounded_finite_normal_values_hold_no_nan_inf_subnormal_or_value_out_of_range(
    dtype: np.dtype,
) -> None:
    # The softmax input: of 300 unbounded float32 (4, 4) arrays most held NaN, inf or subnormals.
    strategy = cst.values(
        dtype=dtype,
        shape=(4, 4),
        min_value=-10,
        max_value=10,
        allow_nan=False,
        allow_infinity=False,
        allow_subnormal=False,
    )
    arrays = collect(strategy, 300)
    assert all(a.dtype == dtype and a.shape == (4, 4) for a in arrays)
    x = np.concatenate([_parts(a) for a in arrays])
    assert np.isfinite(x).all() and (np.abs(x) <= 10).all()
    assert not _subnormal(x, dtype).any()
    assert {-10.0, 10.0, 0.0} <= set(x.tolist())  # the bounds themselves, and zero
    assert sum(len(set(_parts(a).tolist())) >= 4 for a in arrays) > 100  # not one value repeated


def test_unbounded_float32_values_do_hold_what_the_controls_leave_out() -> None:
    arrays = collect(cst.values(dtype="float32", shape=(4, 4)), 300)
    x = _as_float(np.stack(arrays))
    subnormal = _subnormal(x, np.dtype("float32"))
    held = [np.isnan(x).any(axis=(1, 2)), np.isinf(x).any(axis=(1, 2)), subnormal.any(axis=(1, 2))]
    assert all(h.sum() > 30 for h in held), [int(h.sum()) for h in held]


@pytest.mark.parametrize("dtype", [np.dtype("float32"), BF16, E5M2], ids=str)
def test_each_float_flag_leaves_out_its_values_only(dtype: np.dtype) -> None:
    def seen(**flags: Any) -> np.ndarray:
        return np.concatenate(
            [_as_float(a) for a in collect(cst.values(dtype=dtype, length=64, **flags), 150)]
        )

    no_nan = seen(allow_nan=False)
    assert not np.isnan(no_nan).any() and np.isinf(no_nan).any() and _subnormal(no_nan, dtype).any()
    no_inf = seen(allow_infinity=False)
    assert not np.isinf(no_inf).any() and np.isnan(no_inf).any() and _subnormal(no_inf, dtype).any()
    no_sub = seen(allow_subnormal=False)
    assert not _subnormal(no_sub, dtype).any() and np.isnan(no_sub).any() and np.isinf(no_sub).any()


@pytest.mark.parametrize("dtype", [np.dtype("float32"), BF16, E4M3FN], ids=str)
def test_one_bound_keeps_that_side_and_no_nan_as_hypothesis_floats_do(dtype: np.dtype) -> None:
    x = np.concatenate([_as_float(a) for a in collect(cst.values(dtype=dtype, length=32, min_value=0), 200)])
    assert not np.isnan(x).any() and (x >= 0).all()
    assert not (np.signbit(x) & (x == 0)).any()  # -0.0 lies below min_value=0, as for st.floats
    if dtype != E4M3FN:  # float8_e4m3fn has no infinity
        assert np.isposinf(x).any()  # the unbounded side may be infinite
    assert (x > 1).any() and ((x > 0) & (x < 1)).any()


def test_bounds_between_a_dtypes_values_are_rounded_inwards() -> None:
    x = np.concatenate([_as_float(a) for a in collect(cst.values(dtype=BF16, length=16, max_value=0.1), 100)])
    assert (x <= 0.1).all() and float(np.array(0.1, np.float32).astype(BF16)) > 0.1  # 0.1 rounds up in bf16
    y = np.concatenate(
        [a.astype(np.float64) for a in collect(cst.values(dtype="float32", length=16, min_value=0.1), 100)]
    )
    assert (y >= 0.1).all()


@pytest.mark.parametrize(
    ("dtype", "lo", "hi"), [("int8", -3, 5), ("uint16", 7, 9), ("int4", -2, 3), ("uint2", 1, 3)]
)
def test_integer_bounds_are_kept_and_reached(dtype: str, lo: int, hi: int) -> None:
    arrays = collect(cst.values(dtype=dtype, length=32, min_value=lo, max_value=hi), 100)
    assert all(a.dtype == np.dtype(jnp.dtype(dtype)) for a in arrays)
    seen = {int(v) for a in arrays for v in a.astype(np.int64)}
    assert seen == set(range(lo, hi + 1))


def test_long_controlled_arrays_are_not_mostly_one_value() -> None:
    arrays = collect(cst.values(dtype="float32", length=4096, min_value=0, max_value=1), 60)
    spread = [max(Counter(a.tolist()).values()) / a.size for a in arrays]
    assert sum(s <= 0.75 for s in spread) >= 10, sorted(spread)  # no value in three quarters of them
    assert all((a >= 0).all() and (a <= 1).all() for a in arrays)


def test_elements_give_every_element() -> None:
    arrays = collect(cst.values(dtype="int16", length=100, elements=st.sampled_from([7, 11])), 60)
    seen = {int(v) for a in arrays for v in a}
    assert seen == {7, 11}
    halves = collect(cst.values(dtype=BF16, shape=(3, 5), elements=st.sampled_from([0.5, -1.5])), 30)
    assert {float(v) for a in halves for v in a.ravel()} == {0.5, -1.5}
    flags = collect(cst.values(dtype="bool", length=8, elements=st.just(True)), 10)
    assert all(a.dtype == np.bool_ and a.all() for a in flags)


def test_elements_a_dtype_cannot_hold_are_refused_when_drawn() -> None:
    with pytest.raises(InvalidArgument, match="elements drew 0.1"):
        draw_once(cst.values(dtype="float32", length=4, elements=st.just(0.1)))
    with pytest.raises(InvalidArgument, match="elements drew 300"):
        draw_once(cst.values(dtype="int8", length=4, elements=st.just(300)))


@pytest.mark.parametrize(
    ("dtype", "size", "controls"),
    [
        ("int8", (5, 5), {}),
        ("int4", 16, {}),  # every int4 value, once each
        ("bool", 2, {}),
        ("float8_e4m3fn", 12, {"min_value": 0, "max_value": 1, "allow_subnormal": False}),
        ("float32", 50, {"allow_nan": False}),
        ("complex64", 6, {}),
    ],
)
def test_unique_arrays_hold_no_value_twice(dtype: str, size: Any, controls: dict[str, Any]) -> None:
    for a in collect(cst.values(dtype=dtype, shape=size, unique=True, **controls), 30):
        x = a.ravel()
        assert x.dtype == np.dtype(jnp.dtype(dtype))
        kept = [v for v in x.tolist() if v == v]  # NaN may repeat
        assert len(set(kept)) == len(kept)
        if controls.get("min_value") is not None:
            f = _as_float(x)
            assert (f >= controls["min_value"]).all() and (f <= controls["max_value"]).all()


def test_a_flag_a_dtype_has_nothing_for_is_fine_false_and_ignored_for_drawn_dtypes() -> None:
    assert all(a.dtype == np.int8 for a in collect(cst.values(dtype="int8", length=4, allow_nan=False), 5))
    drawn = collect(
        cst.sharded_arrays(
            dtype=st.sampled_from(["int8", "float8_e4m3fn", "float32"]),
            shape=(32,),
            placements=["numpy"],
            allow_infinity=True,  # float8_e4m3fn and int8 have none: ignored for them when drawn
            allow_nan=False,
        ),
        200,
    )
    assert {a.dtype.name for a in drawn} == {"int8", "float8_e4m3fn", "float32"}
    assert not any(np.isnan(_as_float(a)).any() for a in drawn)
    assert any(np.isinf(_as_float(a)).any() for a in drawn if a.dtype == np.float32)


def test_sharded_arrays_take_the_value_controls() -> None:
    sharding = NamedSharding(mesh_2x4(), P("rows", "cols"))
    arrays = collect(
        cst.sharded_arrays(
            dtype=st.sampled_from(["bfloat16", "float32", "int8"]),
            shape=(4, 8),
            sharding=sharding,
            min_value=-1,
            max_value=1,
            allow_nan=False,
        ),
        60,
    )
    for a in arrays:
        assert isinstance(a, jax.Array) and a.sharding == sharding
        x = _as_float(np.asarray(a))
        assert np.isfinite(x).all() and (np.abs(x) <= 1).all()
    uniq = collect(cst.sharded_arrays(dtype="int8", shape=(8,), unique=True, placements=["numpy"]), 20)
    assert all(len(set(a.tolist())) == 8 for a in uniq)


# ---------------------------------------------------------------------------
# Dtypes


def _names(dtypes: list[np.dtype]) -> set[str]:
    return {d.name for d in dtypes}


EVERY = {name for names in DTYPE_KINDS.values() for name in names}


def test_dtypes_reach_every_kind_and_no_64_bit_dtype_without_x64() -> None:
    drawn = _names(collect(cst.dtypes(), 400))
    assert drawn == EVERY - set(X64_NAMES)
    assert {"bool", "int4", "uint4", "float8_e4m3fn", "float8_e5m2", "bfloat16", "complex64"} <= drawn
    assert _names(collect(cst.dtypes(x64=True), 400)) == EVERY
    assert _names(collect(cst.dtypes(kinds=["float"], x64=False), 40)) == {"float16", "bfloat16", "float32"}
    assert _names(collect(cst.dtypes(kinds="int4"), 40)) == set(DTYPE_KINDS["int4"])
    assert _names(collect(cst.dtypes(sizes=8), 100)) == {"int8", "uint8", "bool", *DTYPE_KINDS["float8"]}
    wide = cst.dtypes(kinds=["int", "complex"], sizes=[64, 128], x64=True)
    assert _names(collect(wide, 40)) == {"int64", "complex64", "complex128"}  # complex64 is 64 bits


def test_dtypes_with_x64_none_follow_the_config_when_drawn(x64_on: None) -> None:
    assert set(X64_NAMES) <= _names(collect(cst.dtypes(), 400))
    assert _names(collect(cst.dtypes(kinds="float", sizes=64), 10)) == {"float64"}


def test_dtypes_shrink_to_float32_or_the_first_of_their_kinds() -> None:
    assert find(cst.dtypes(), lambda d: True) == np.float32
    assert find(cst.dtypes(kinds=["int", "uint"]), lambda d: True) == np.int8
    assert find(cst.dtypes(contract="full"), lambda d: True) == np.float32


@pytest.mark.parametrize("name", sorted(EVERY - set(X64_NAMES)))
def test_sharded_arrays_draw_and_place_every_dtype_dtypes_gives(name: str) -> None:
    dtype = np.dtype(jnp.dtype(name))
    sharding = NamedSharding(mesh_2x4(), P("cols"))
    for a in collect(cst.sharded_arrays(dtype=dtype, shape=(8, 2), sharding=sharding), 5):
        assert isinstance(a, jax.Array) and a.dtype == dtype and a.shape == (8, 2) and a.sharding == sharding


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_values_reach_their_edges(dtype: np.dtype) -> None:
    x = np.concatenate([_as_float(a) for a in collect(cst.values(dtype=dtype, length=64), 40)])
    fi = ml_dtypes.finfo(dtype)
    assert np.isnan(x).any() and (x == float(fi.max)).any()
    if float(fi.min) < 0:
        assert (x == float(fi.min)).any() and (x == 0).any()
    assert (x == float(fi.smallest_normal)).any()
    with np.errstate(invalid="ignore"):
        table = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    if np.isinf(table).any():
        assert np.isinf(x).any()
    if _subnormal(table, dtype).any():
        assert _subnormal(x, dtype).any()


def test_values_draw_bool_and_every_int4_value() -> None:
    flags = collect(cst.values(dtype="bool", length=64), 30)
    assert all(a.dtype == np.bool_ for a in flags) and any(a.any() and not a.all() for a in flags)
    fours = {int(v) for a in collect(cst.values(dtype="int4", length=64), 30) for v in a.astype(np.int8)}
    assert fours == set(range(-8, 8))


def test_a_64_bit_dtype_without_x64_is_refused_saying_to_enable_it() -> None:
    for dtype in ("float64", "int64", "uint64", "complex128"):
        with pytest.raises(InvalidArgument, match="enable x64|Enable x64"):
            draw_once(cst.sharded_arrays(dtype=dtype, shape=(2,), placements=["numpy"]))


def test_a_64_bit_dtype_with_x64_stays_64_bit(x64_on: None) -> None:
    for a in collect(cst.sharded_arrays(dtype="float64", shape=(4,), placements=["uncommitted"]), 5):
        assert a.dtype == np.float64


# ---------------------------------------------------------------------------
# Meshes, shapes, shardings


def test_meshes_with_axes_always_have_them_and_sometimes_others() -> None:
    drawn = collect(cst.meshes(with_axes=("batch",)), 200)
    assert all("batch" in m.axis_names for m in drawn)
    assert {len(m.axis_names) for m in drawn} == {1, 2, 3}
    assert {m.axis_names.index("batch") for m in drawn} == {0, 1, 2}  # in any position
    assert {m.shape["batch"] for m in drawn} >= {1, 2, 8}
    assert {a for m in drawn for a in m.axis_names} == {"batch", "data", "model"}
    two = collect(cst.meshes(with_axes=("data", "x"), ndims=3, min_axis_size=2), 40)
    assert all(set(m.axis_names) == {"data", "x", "model"} and min(m.devices.shape) >= 2 for m in two)


def test_meshes_take_an_int_ndims() -> None:
    assert {m.devices.ndim for m in collect(cst.meshes(ndims=2), 40)} == {2}


def test_meshes_name_their_own_axes_by_default_axes() -> None:
    drawn = collect(cst.meshes(ndims=[1, 2, 3], default_axes=("rows", "cols")), 100)
    assert {a for m in drawn for a in m.axis_names} == {"rows", "cols", "axis2"}
    assert all(m.axis_names == ("rows",) for m in drawn if m.devices.ndim == 1)
    assert {a for m in collect(cst.meshes(), 40) for a in m.axis_names} == {"data", "model"}
    flat = collect(cst.meshes(kind="2d-data1", default_axes=("rows", "cols")), 20)
    assert all(m.shape["rows"] == 1 and m.shape["cols"] >= 2 for m in flat)
    others = collect(cst.meshes(with_axes=("rows",), ndims=3, default_axes=("rows", "cols")), 20)
    assert all(set(m.axis_names) == {"rows", "cols", "axis2"} for m in others)
    for wrong in [("rows",), ("rows", "rows"), "rc", ("rows", "")]:
        with pytest.raises(InvalidArgument, match="default_axes"):
            cst.meshes(default_axes=wrong)


@pytest.mark.parametrize(
    ("layout", "ndim", "split"),
    [
        (NamedSharding(mesh_2x4(), P("cols", "rows")), None, (4, 2)),
        (NamedSharding(mesh_2x4(), P(("rows", "cols"))), 3, (8, 1, 1)),
        (NamedSharding(mesh_2x4(), P(None, "rows")), None, (1, 2)),
        (jax.sharding.SingleDeviceSharding(jax.devices()[0]), 2, (1, 1)),
    ],
)
def test_shapes_divide_by_what_the_sharding_splits_each_dimension_into(
    layout: Any, ndim: int | None, split: tuple[int, ...]
) -> None:
    drawn = collect(cst.shapes(sharding=layout, ndim=ndim), 60)
    assert all(len(s) == len(split) for s in drawn)
    for s in drawn:
        assert all(side % parts == 0 and side > 0 for side, parts in zip(s, split, strict=True)), s
        layout.shard_shape(s)  # JAX agrees
    assert len(set(drawn)) > 5
    assert find(cst.shapes(sharding=layout, ndim=ndim), lambda s: True) == split


def test_shapes_keep_min_and_max_side() -> None:
    mesh = mesh_2x4()
    drawn = collect(cst.shapes(spec=P("cols", None), mesh=mesh, min_side=0, max_side=12), 100)
    assert any(0 in s for s in drawn)
    assert all(s[0] % 4 == 0 and 0 <= s[0] <= 12 and 0 <= s[1] <= 12 for s in drawn)
    assert {s[0] for s in drawn} == {0, 4, 8, 12}
    wide = collect(cst.shapes(spec=P("cols"), mesh=mesh, min_side=9), 30)
    assert all(s[0] >= 12 and s[0] % 4 == 0 for s in wide)


def test_shardings_with_a_spec_draw_meshes_that_have_its_axes() -> None:
    spec = P("batch", None)
    drawn = collect(cst.shardings(spec=spec), 100)
    assert all(s.spec == spec and "batch" in s.mesh.axis_names for s in drawn)
    assert len({s.mesh.shape["batch"] for s in drawn}) >= 4
    assert any(len(s.mesh.axis_names) > 1 for s in drawn)
    fixed = collect(cst.shardings(spec=P("rows"), mesh=mesh_2x4()), 5)
    assert all(s == NamedSharding(mesh_2x4(), P("rows")) for s in fixed)
    divided = collect(cst.shardings(spec=P("batch", "x"), shape=(6, 4)), 60)
    assert all(cst.spec_divides(s.spec, s.mesh, (6, 4)) for s in divided)
    assert {s.mesh.shape["batch"] for s in divided} >= {2, 3}


def test_shardings_with_a_spec_over_meshes_without_its_axes_fail_when_drawn() -> None:
    with pytest.raises(InvalidArgument, match="batch"):
        draw_once(cst.shardings(spec=P("batch"), mesh=cst.meshes()))


def test_partition_specs_over_a_strategy_of_meshes() -> None:
    specs = collect(cst.partition_specs(cst.meshes(ndims=3), 2), 100)
    used = {a for s in specs for e in s if e is not None for a in ((e,) if isinstance(e, str) else e)}
    assert used == {"data", "model", "axis2"}
    undivided = collect(cst.partition_specs(cst.meshes(min_size=2), 1, shape=(7,), divisible=False), 20)
    assert all(s[0] is not None for s in undivided)


@pytest.mark.parametrize(
    "sharding",
    [
        cst.shardings(spec=P("batch", None)),
        cst.shardings(spec=P(None, ("x", "y")), mesh=cst.meshes(axis_names=("x", "y"))),
        NamedSharding(mesh_2x4(), P("cols", "rows")),
    ],
    ids=["spec", "spec-tuple", "fixed"],
)
def test_sharded_arrays_without_a_shape_draw_one_the_sharding_divides(sharding: Any) -> None:
    arrays = collect(cst.sharded_arrays(sharding=sharding, dtype="int8"), 40)
    for a in arrays:
        assert isinstance(a, jax.Array) and a.ndim == 2 and a.size > 0
        assert isinstance(a.sharding, NamedSharding)
        assert cst.spec_divides(a.sharding.spec, a.sharding.mesh, a.shape)
    assert len({a.shape for a in arrays}) > 3


# ---------------------------------------------------------------------------
# Drawn meshes and shardings printed by their device ids (issue 28, point 4)


def _calls(text: str, name: str) -> list[str]:
    """Every ``name(...)`` call in ``text``, its parentheses balanced."""
    found = []
    for start in [m.start() for m in re.finditer(re.escape(name) + r"\(", text)]:
        depth = 0
        for end in range(start + len(name), len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                found.append(text[start : end + 1])
                break
    return found


def _failure_text(test: Callable[[], None], capsys: pytest.CaptureFixture[str]) -> str:
    """What Hypothesis printed for the falsifying example of ``test``: its notes, and its reporter's lines."""
    with pytest.raises(AssertionError) as failure:
        test()
    return "\n".join(getattr(failure.value, "__notes__", [])) + "\n" + capsys.readouterr().out


SHRUNK = (Phase.generate, Phase.shrink)  # the falsifying example, shrunk (no "explain" phase: faster)
PASTE = {"mesh_from_ids": mesh_from_ids, "NamedSharding": NamedSharding, "P": P, "AxisType": AxisType}


def _ids_in_order(mesh: Mesh) -> bool:
    ids = [int(d.id) for d in mesh.devices.flat]
    return ids == sorted(ids)


def test_a_failing_drawn_mesh_prints_as_the_call_that_rebuilds_it(capsys: pytest.CaptureFixture[str]) -> None:
    # The issue: a failing mesh printed as Mesh(axis_sizes=(7, 1), ...), without its device ids.
    seen: list[Mesh] = []

    @settings(database=None, max_examples=100, deadline=None, derandomize=True, phases=SHRUNK)
    @given(mesh=cst.meshes(ndims=2, min_size=4))
    def assumes_id_order(mesh: Mesh) -> None:
        seen.append(mesh)
        assert _ids_in_order(mesh)

    text = _failure_text(assumes_id_order, capsys)
    failing = seen[-1]  # the minimal example runs last
    assert not _ids_in_order(failing)
    assert "mesh=" + mesh_text(failing) in text, text  # as show.mesh_text gives it, in place
    printed = _calls(text, "mesh_from_ids")
    assert printed and f"mesh_from_ids({mesh_ids(failing)}" in printed[0]
    rebuilt = eval(printed[0], PASTE)  # pasted back, it is the mesh that failed
    assert rebuilt == failing and mesh_ids(rebuilt) == mesh_ids(failing)
    assert "axis_sizes=" not in text


def test_a_failing_drawn_sharding_and_a_sharded_array_show_their_mesh_by_device_ids(
    capsys: pytest.CaptureFixture[str],
) -> None:
    explicit = jax.make_mesh((2, 4), ("rows", "cols"), axis_types=(AxisType.Explicit,) * 2)
    shuffled = Mesh(np.array(jax.devices())[[5, 2, 7, 0, 1, 6, 3, 4]].reshape(2, 4), ("rows", "cols"))
    seen: list[tuple[NamedSharding, NamedSharding, jax.Array]] = []

    @settings(database=None, max_examples=100, deadline=None, derandomize=True, phases=SHRUNK)
    @given(
        drawn=cst.shardings(ndim=2, mesh=cst.meshes(min_size=2)),
        fixed=cst.shardings(ndim=2, mesh=st.sampled_from([explicit, shuffled])),
        x=cst.sharded_arrays(sharding=cst.shardings(spec=P("batch", None))),
    )
    def fails(drawn: NamedSharding, fixed: NamedSharding, x: jax.Array) -> None:
        seen.append((drawn, fixed, x))
        assert _ids_in_order(drawn.mesh) or fixed.mesh is explicit

    text = _failure_text(fails, capsys)
    drawn, fixed, x = seen[-1]
    assert not _ids_in_order(drawn.mesh) and fixed.mesh is shuffled
    for sharding in (drawn, fixed):
        assert sharding_text(sharding) in text, text
        [call] = [c for c in _calls(text, "NamedSharding") if mesh_text(sharding.mesh) in c][:1]
        assert eval(call, PASTE) == sharding
    # A jax.Array prints by its values: its layout comes in a note, with the device ids.
    assert isinstance(x.sharding, NamedSharding)
    assert f"laid out by {sharding_text(x.sharding)}" in text
    assert f"a float32[{', '.join(map(str, x.shape))}] array" in text


def test_a_mesh_with_explicit_axes_prints_them_and_pastes_back(capsys: pytest.CaptureFixture[str]) -> None:
    # JAX's repr of such a mesh is valid Python and shorter than the call: st.builds alone would print it.
    explicit = jax.make_mesh((2, 4), ("rows", "cols"), axis_types=(AxisType.Explicit,) * 2)

    @settings(database=None, max_examples=5, deadline=None)
    @given(cst.shardings(spec=P("rows"), mesh=explicit))
    def fails(sharding: NamedSharding) -> None:
        raise AssertionError

    text = _failure_text(fails, capsys)
    [call] = _calls(text, "mesh_from_ids")
    assert "AxisType.Explicit" in call and eval(call, PASTE) == explicit


def test_where_hypothesis_takes_no_printer_small_meshes_still_print_by_ids(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The public fallback: st.builds, which Hypothesis prints as the call where that is shorter.
    monkeypatch.setattr(library_strategies, "_PRINTERS", [False])
    seen: list[Mesh] = []

    @settings(database=None, max_examples=100, deadline=None, derandomize=True, phases=SHRUNK)
    @given(cst.meshes(ndims=2, min_size=4, max_size=4), cst.shardings(ndim=1, mesh=cst.meshes(max_size=2)))
    def fails(mesh: Mesh, sharding: NamedSharding) -> None:
        seen.append(mesh)
        assert _ids_in_order(mesh)

    text = _failure_text(fails, capsys)
    assert mesh_text(seen[-1]) in text, text
    assert eval(_calls(text, "mesh_from_ids")[0], PASTE) == seen[-1]
    [sharding] = _calls(text, "NamedSharding")
    assert "mesh_from_ids(" in sharding and isinstance(eval(sharding, PASTE), NamedSharding)


# ---------------------------------------------------------------------------
# Values with structure (issue 28, point 6)

STRUCTURED = [np.dtype("float16"), BF16, np.dtype("float32")]


def _rows(a: np.ndarray, axis: int = -1) -> np.ndarray:
    x = np.moveaxis(_as_float(np.asarray(a)), axis, -1)
    return x.reshape(-1, x.shape[-1])


def _significand_bits(dtype: np.dtype) -> int:
    return int(ml_dtypes.finfo(dtype).nmant) + 1


def _has_offset(row: np.ndarray, dtype: np.dtype) -> bool:
    p = _significand_bits(dtype)
    middle, spread = (row.max() + row.min()) / 2, (row.max() - row.min()) / 2
    ratio = abs(middle) / spread if spread > 0 else math.inf
    return spread > 0 and 2 ** (-(-p // 2) - 1) <= ratio <= 2 ** (-(-p // 2) + 3)


def _has_huge_max(row: np.ndarray, dtype: np.dtype) -> bool:
    with np.errstate(over="ignore"):
        top = np.array(row.max()).astype(dtype)
        return bool(np.isfinite(top)) and bool(np.isinf(np.exp(top.astype(np.float32)).astype(dtype)))


def _has_mixed_magnitudes(row: np.ndarray, dtype: np.dtype) -> bool:
    large = np.abs(row).max()
    big = np.abs(row) == large
    i, j = np.flatnonzero(big)[[0, -1]]
    small = row[~big]
    ulp = 2.0 ** (math.floor(math.log2(large)) - _significand_bits(dtype) + 1)
    return (
        big.sum() == 2
        and row[i] == -row[j]
        and j - i >= 2
        and bool((np.abs(small) <= ulp / 4).all())
        and (bool((small > 0).all()) or bool((small < 0).all()))
    )


HAS = {"offset": _has_offset, "huge-max": _has_huge_max, "mixed-magnitudes": _has_mixed_magnitudes}


@pytest.mark.parametrize("kind", STRUCTURES)
@pytest.mark.parametrize("dtype", STRUCTURED, ids=str)
def test_every_row_of_every_array_has_the_structure(dtype: np.dtype, kind: str) -> None:
    arrays = collect(cst.values(dtype=dtype, shape=(5, 16), structure=kind), 40)
    tiny = float(ml_dtypes.finfo(dtype).smallest_normal)
    for a in arrays:
        assert a.dtype == dtype and a.shape == (5, 16)
        x = _as_float(a)
        assert np.isfinite(x).all() and (np.abs(x) >= tiny).all()  # finite and normal
        assert all(HAS[kind](row, dtype) for row in _rows(a)), a
    assert len({float(np.abs(_as_float(a)).max()) for a in arrays}) > 10  # magnitudes vary


def test_structured_float64_rows_under_x64(x64_on: None) -> None:
    for kind in STRUCTURES:
        for a in collect(cst.values(dtype="float64", shape=(3, 8), structure=kind), 10):
            assert a.dtype == np.float64 and all(HAS[kind](row, a.dtype) for row in _rows(a))


@pytest.mark.parametrize(("lo", "hi"), [(-100.0, 100.0), (-1.0, 0.5), (90.0, 95.0), (-3.0, -1.0)])
def test_structures_keep_the_bounds(lo: float, hi: float) -> None:
    room = {"offset": True, "huge-max": hi > 90, "mixed-magnitudes": lo < 0 < hi}
    kinds = [k for k in STRUCTURES if room[k]]
    for kind in kinds:
        arrays = collect(cst.values(shape=(4, 8), min_value=lo, max_value=hi, structure=kind), 30)
        for a in arrays:
            assert (a >= lo).all() and (a <= hi).all(), (kind, a)
            assert all(HAS[kind](row, a.dtype) for row in _rows(a))


def test_a_sequence_of_kinds_gives_the_rows_each_in_turn_along_the_axis() -> None:
    arrays = collect(cst.values(shape=(3, 6), structure=STRUCTURES, axis=0), 30)
    orders = list(itertools.permutations(STRUCTURES))
    for a in arrays:
        columns = _rows(a, axis=0)
        assert len(columns) == 6
        # The kinds each column has (an offset row of c > 89 has a huge max too, as has L, s, -L).
        kinds = [{k for k in STRUCTURES if HAS[k](c, a.dtype)} for c in columns]
        turns = [kinds[r] & kinds[r + 3] for r in range(3)]  # columns r and r + 3 have the same kind
        assert any(all(kind in turn for kind, turn in zip(order, turns, strict=True)) for order in orders)


def test_sharded_arrays_take_the_structure_and_draw_rows_long_enough() -> None:
    layout = cst.shardings(spec=P(None, "x"), mesh=cst.meshes(axis_names=("x",), min_size=1))
    arrays = collect(cst.sharded_arrays(sharding=layout, structure="mixed-magnitudes"), 30)
    for a in arrays:
        assert isinstance(a, jax.Array) and a.shape[-1] >= 3
        assert all(_has_mixed_magnitudes(row, np.dtype(a.dtype)) for row in _rows(np.asarray(a)))
    assert any(a.shape[-1] == 3 for a in arrays)
    fixed = NamedSharding(mesh_2x4(), P("rows", "cols"))
    logits = cst.sharded_arrays(shape=(4, 8), sharding=fixed, dtype="bfloat16", structure="huge-max")
    for a in collect(logits, 10):
        assert a.sharding == fixed and all(_has_huge_max(r, BF16) for r in _rows(np.asarray(a)))
        e = jnp.exp(a.astype(jnp.float32))  # a softmax without the max shift, sharded: NaN in every row
        assert np.isnan(np.asarray(e / e.sum(axis=-1, keepdims=True))).any(axis=-1).all()


def test_a_drawn_shape_with_short_rows_is_skipped_and_a_drawn_int_dtype_refused() -> None:
    arrays = collect(
        cst.sharded_arrays(shape=st.sampled_from([(4, 1), (2, 5)]), structure="offset", placements=["numpy"]),
        20,
    )
    assert arrays and all(a.shape == (2, 5) for a in arrays)
    with pytest.raises(InvalidArgument, match="structure='offset'.*int8"):
        draw_once(cst.sharded_arrays(shape=(4,), dtype=st.just("int8"), structure="offset"))


# Each kind against the bug it is for: a broken function, and a correct one that must pass.


def _layer_norm_one_pass(x: np.ndarray) -> np.ndarray:  # the bug: E[x**2] - E[x]**2
    mean = x.mean(axis=-1, keepdims=True)
    var = (x * x).mean(axis=-1, keepdims=True) - mean * mean
    return (x - mean) / np.sqrt(var + x.dtype.type(1e-5))


def _layer_norm(x: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + x.dtype.type(1e-5))


def _softmax_without_shift(x: np.ndarray) -> np.ndarray:  # the bug: exp(x) overflows
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sum_in_dtype(x: np.ndarray) -> np.ndarray:  # the bug: accumulates in the input's precision
    return np.cumsum(x, axis=-1, dtype=x.dtype)[..., -1]


def _sum_wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64).sum(axis=-1).astype(x.dtype)


def _exact_sum(x: np.ndarray) -> np.ndarray:
    return np.array([math.fsum(row) for row in _rows(x)]).reshape(x.shape[:-1])


# kind: (broken, correct, reference in float64, rtol, atol); float32 rows of 16 in [-100, 100]
BUGS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], ...]] = {
    "offset": (_layer_norm_one_pass, _layer_norm, lambda x: _layer_norm(x.astype(np.float64))),
    "huge-max": (_softmax_without_shift, _softmax, lambda x: _softmax(x.astype(np.float64))),
    "mixed-magnitudes": (_sum_in_dtype, _sum_wide, _exact_sum),
}
TOLERANCE = {"offset": (1e-2, 1e-2), "huge-max": (1e-2, 1e-2), "mixed-magnitudes": (1e-2, 0.0)}


def _seeds_caught(kind: str, f: Callable[[np.ndarray], np.ndarray], structure: str | None) -> int:
    """Of 10 seeds, in how many a test of ``f`` at 5 examples fails."""
    reference = BUGS[kind][2]
    rtol, atol = TOLERANCE[kind]
    strategy = cst.values(shape=(4, 16), min_value=-100, max_value=100, allow_nan=False, structure=structure)
    caught = 0
    for k in range(10):

        @settings(
            max_examples=5,
            derandomize=False,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @seed(k)
        @given(strategy)
        def test(x: np.ndarray) -> None:
            with np.errstate(all="ignore"):
                got = f(x).astype(np.float64)
            np.testing.assert_allclose(got, reference(x), rtol=rtol, atol=atol)

        try:
            test()
        except AssertionError:
            caught += 1
    return caught


@pytest.mark.parametrize("kind", STRUCTURES)
def test_each_structure_catches_its_bug_at_5_examples_in_every_seed(kind: str) -> None:
    # Measured (float32, 4x16 rows in [-100, 100], 5 examples, seeds 0-9): without structure= the
    # one-pass layer norm was caught in 0/10, the softmax without the max shift in 8/10, the sum
    # in float32 in 0/10; with it, each in 10/10, and the correct versions in 0/10.
    broken, correct, _ = BUGS[kind]
    assert _seeds_caught(kind, broken, kind) == 10
    assert _seeds_caught(kind, correct, kind) == 0  # no false failure
    assert _seeds_caught(kind, broken, None) < 10  # without the keyword, only by luck


# ---------------------------------------------------------------------------
# Misuse: each an InvalidArgument naming the argument, when the strategy is built

_NS = NamedSharding(mesh_2x4(), P("cols"))

INVALID: list[tuple[str, Callable[[], object]]] = [
    # values
    ("min_value", lambda: cst.values(length=2, min_value=2, max_value=1)),
    ("min_value", lambda: cst.values(dtype="int8", length=2, min_value=300)),
    ("max_value", lambda: cst.values(dtype="float32", length=2, max_value=1e39)),
    ("max_value", lambda: cst.values(dtype="float8_e4m3fn", length=2, max_value=500)),
    ("min_value", lambda: cst.values(dtype="float8_e8m0fnu", length=2, min_value=0)),
    ("min_value", lambda: cst.values(length=2, min_value=float("nan"))),
    ("min_value", lambda: cst.values(length=2, min_value="1")),  # type: ignore[arg-type]
    ("min_value", lambda: cst.values(dtype="bool", length=2, min_value=0)),
    ("min_value", lambda: cst.values(dtype="int8", length=2, min_value=0.2, max_value=0.8)),
    ("min_value", lambda: cst.values(dtype="float8_e4m3fn", length=2, min_value=0.0001, max_value=0.0002)),
    ("allow_nan", lambda: cst.values(dtype="int8", length=2, allow_nan=True)),
    ("allow_nan", lambda: cst.values(length=2, allow_nan="no")),  # type: ignore[arg-type]
    ("allow_nan", lambda: cst.values(length=2, min_value=0, allow_nan=True)),
    ("allow_infinity", lambda: cst.values(dtype="float8_e4m3fn", length=2, allow_infinity=True)),
    ("allow_infinity", lambda: cst.values(length=2, min_value=0, max_value=1, allow_infinity=True)),
    ("allow_subnormal", lambda: cst.values(length=2, min_value=1, allow_subnormal=True)),
    ("allow_subnormal", lambda: cst.values(dtype="uint8", length=2, allow_subnormal=True)),
    (
        "allow_subnormal",
        lambda: cst.values(dtype=E4M3FN, length=2, min_value=0.001, max_value=0.01, allow_subnormal=False),
    ),
    ("elements", lambda: cst.values(length=2, elements=st.just(1.0), min_value=0)),
    ("elements", lambda: cst.values(length=2, elements=[1.0])),  # type: ignore[arg-type]
    ("unique", lambda: cst.values(length=2, unique="yes")),  # type: ignore[arg-type]
    ("unique", lambda: cst.values(dtype="int4", length=17, unique=True)),
    ("unique", lambda: cst.values(dtype="int8", shape=(2, 3), min_value=0, max_value=4, unique=True)),
    ("unique", lambda: cst.values(dtype="bool", length=3, unique=True)),
    # sharded_arrays
    ("max_value", lambda: cst.sharded_arrays(shape=(2,), min_value=3, max_value=1)),
    ("allow_nan", lambda: cst.sharded_arrays(shape=(2,), dtype="int8", allow_nan=True)),
    ("unique", lambda: cst.sharded_arrays(shape=(300,), dtype="uint8", unique=True)),
    ("shardings(spec=", lambda: cst.sharded_arrays(sharding=P("x"))),  # type: ignore[arg-type]
    ("shape", lambda: cst.sharded_arrays()),
    (
        "shape",
        lambda: cst.sharded_arrays(sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0])),
    ),
    # dtypes
    ("kinds", lambda: cst.dtypes(kinds=["floaty"])),
    ("kinds", lambda: cst.dtypes(kinds=[])),
    ("sizes", lambda: cst.dtypes(sizes=[0])),
    ("sizes", lambda: cst.dtypes(kinds="float", sizes=[3])),
    ("contract", lambda: cst.dtypes(contract="full", kinds=["int"])),
    ("x64", lambda: cst.dtypes(x64="yes")),  # type: ignore[arg-type]
    ("x64", lambda: cst.dtypes(kinds="float", sizes=64, x64=False)),
    # meshes
    ("with_axes", lambda: cst.meshes(with_axes="batch")),
    ("with_axes", lambda: cst.meshes(with_axes=())),
    ("with_axes", lambda: cst.meshes(with_axes=("a", "a"))),
    ("with_axes", lambda: cst.meshes(with_axes=("a",), axis_names=("a",))),
    ("with_axes", lambda: cst.meshes(with_axes=("a",), kind="2d")),
    ("ndims", lambda: cst.meshes(with_axes=("a", "b"), ndims=1)),
    ("ndims", lambda: cst.meshes(ndims=0)),
    ("ndims", lambda: cst.meshes(ndims="2")),  # type: ignore[arg-type]
    # shapes
    ("sharding", lambda: cst.shapes()),
    ("sharding", lambda: cst.shapes(sharding=_NS, spec=P("cols"), mesh=mesh_2x4())),
    ("sharding", lambda: cst.shapes(sharding=cst.shardings(ndim=1))),  # type: ignore[arg-type]
    ("sharding", lambda: cst.shapes(sharding=P("cols"))),  # type: ignore[arg-type]
    ("mesh", lambda: cst.shapes(spec=P("cols"))),
    ("mesh", lambda: cst.shapes(spec=P("cols"), mesh=cst.meshes())),  # type: ignore[arg-type]
    ("spec", lambda: cst.shapes(spec=P("batch"), mesh=mesh_2x4())),
    ("spec", lambda: cst.shapes(spec=("cols",), mesh=mesh_2x4())),  # type: ignore[arg-type]
    ("ndim", lambda: cst.shapes(spec=P("cols", "rows"), mesh=mesh_2x4(), ndim=1)),
    ("ndim", lambda: cst.shapes(sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0]))),
    ("min_side", lambda: cst.shapes(sharding=_NS, min_side=-1)),
    ("max_side", lambda: cst.shapes(sharding=_NS, min_side=4, max_side=2)),
    ("max_side", lambda: cst.shapes(sharding=_NS, max_side=3)),  # no multiple of 4 in [1, 3]
    # shardings, partition_specs
    ("spec", lambda: cst.shardings(spec="batch")),  # type: ignore[arg-type]
    ("spec", lambda: cst.shardings(spec=P("x", "x"))),
    ("spec", lambda: cst.shardings(spec=P("batch"), mesh=mesh_2x4())),
    ("spec", lambda: cst.shardings(spec=P("cols"), mesh=mesh_2x4(), shape=(6,))),
    ("ndim", lambda: cst.shardings(spec=P("a", "b"), ndim=1)),
    ("shape", lambda: cst.shardings(spec=P("a", "b"), shape=(4,))),
    ("divisible", lambda: cst.shardings(spec=P("a"), divisible=False)),
    ("mesh", lambda: cst.shardings(spec=P("a"), mesh="mesh")),  # type: ignore[arg-type]
    ("mesh", lambda: cst.partition_specs("mesh", 1)),  # type: ignore[arg-type]
    ("divisible", lambda: cst.partition_specs(cst.meshes(), 1, divisible=False)),
    # structure=, axis=
    ("structure='bogus'", lambda: cst.values(length=4, structure="bogus")),
    ("structure=[]", lambda: cst.values(length=4, structure=[])),
    ("structure=('offset', 'offset')", lambda: cst.values(length=4, structure=("offset", "offset"))),
    ("axis=0", lambda: cst.values(length=4, axis=0)),
    ("axis='0'", lambda: cst.values(length=4, structure="offset", axis="0")),  # type: ignore[arg-type]
    ("axis=2", lambda: cst.values(shape=(4, 4), structure="offset", axis=2)),
    ("allow_nan=True", lambda: cst.values(length=4, structure="offset", allow_nan=True)),
    ("allow_infinity=True", lambda: cst.values(length=4, structure="huge-max", allow_infinity=True)),
    ("unique=True", lambda: cst.values(length=4, structure="offset", unique=True)),
    ("elements=", lambda: cst.values(length=4, structure="offset", elements=st.just(1.0))),
    ("dtype=int8", lambda: cst.values(length=4, dtype="int8", structure="offset")),
    ("dtype=complex64", lambda: cst.values(length=4, dtype="complex64", structure="offset")),
    ("dtype=float8_e4m3fn", lambda: cst.values(length=4, dtype=E4M3FN, structure="huge-max")),
    ("shape=(4, 1)", lambda: cst.values(shape=(4, 1), structure="offset")),
    ("shape=(4, 2)", lambda: cst.values(shape=(4, 2), structure=["huge-max", "mixed-magnitudes"])),
    ("shape=(0, 8)", lambda: cst.values(shape=(0, 8), structure="huge-max")),
    ("max_value=10", lambda: cst.values(length=4, structure="huge-max", max_value=10)),
    ("max_value=11", lambda: cst.values(length=4, dtype="float16", structure="huge-max", max_value=11)),
    ("min_value < 0 < max_value", lambda: cst.values(length=4, structure="mixed-magnitudes", min_value=0)),
    ("max_value=1e-40", lambda: cst.values(length=4, structure="offset", min_value=0, max_value=1e-40)),
    ("structure=", lambda: cst.sharded_arrays(shape=(4,), dtype="int8", structure="offset")),
    ("shape=(2, 1)", lambda: cst.sharded_arrays(shape=(2, 1), structure="offset")),
    ("max_value=10", lambda: cst.sharded_arrays(shape=(2, 4), structure="huge-max", max_value=10)),
    ("unique=True", lambda: cst.sharded_arrays(shape=(2, 4), structure="offset", unique=True)),
]


@pytest.mark.parametrize(("name", "make"), INVALID, ids=[f"{i}-{n}" for i, (n, _) in enumerate(INVALID)])
def test_each_misuse_is_an_invalid_argument_naming_the_argument(
    name: str, make: Callable[[], object]
) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(name)):
        make()
