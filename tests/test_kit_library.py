"""The public library for testing any sharded JAX code: N-D strategies, assertions, host devices.

Each assertion is shown to pass a right answer and to fail a wrong one with the
``expected / got / hint`` message; each new strategy to reach what its docstring
promises; ``--host-devices`` to give a user's own run its devices, or refuse.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import find
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from conformance import strategies as cst
from conformance._src.inputs.case import make_mesh
from conformance.assertions import (
    KINDS,
    AssertionFailed,
    assert_compiles_once,
    assert_input_intact,
    assert_jit_shardings,
    assert_layout,
    assert_shards,
    assert_values_equal,
    flush_subnormals,
)
from tests.test_kit_strategies import collect, draw_once


def mesh_2x4() -> Mesh:
    return make_mesh(list(range(8)), (2, 4), ("rows", "cols"))


def _entries(spec: P) -> list[tuple[str, ...]]:
    return [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]


# ---------------------------------------------------------------------------
# Strategies of any rank


def test_meshes_reach_three_axes_every_factorisation_and_custom_names() -> None:
    drawn = collect(cst.meshes(ndims=(3,)), 300)
    assert {m.devices.ndim for m in drawn} == {3}
    assert {tuple(m.devices.shape) for m in drawn} >= {(2, 2, 2), (1, 2, 4), (4, 2, 1), (1, 1, 1)}
    assert {tuple(m.axis_names) for m in drawn} >= {("data", "model", "axis2"), ("axis2", "model", "data")}
    named = collect(cst.meshes(axis_names=("batch", "x"), min_axis_size=2), 100)
    assert all(m.axis_names == ("batch", "x") and min(m.devices.shape) >= 2 for m in named)
    assert {tuple(m.devices.shape) for m in named} == {(2, 2), (2, 3), (3, 2), (2, 4), (4, 2)}


def test_partition_specs_reach_none_one_axis_tuples_and_unused_axes() -> None:
    mesh = make_mesh(list(range(8)), (2, 2, 2), ("a", "b", "c"))
    specs = collect(cst.partition_specs(mesh, 2), 300)
    kinds = {len(e) for s in specs for e in _entries(s)}
    assert kinds == {0, 1, 2, 3}  # None, one axis, tuples of two and of three
    assert any(sum(map(len, _entries(s))) < 3 for s in specs)  # unused axes
    for s in specs:
        used = [a for e in _entries(s) for a in e]
        assert len(used) == len(set(used)) and len(_entries(s)) <= 2


def test_partition_specs_shrink_to_fully_replicated() -> None:
    mesh = make_mesh(list(range(8)), (2, 4), ("x", "y"))
    assert find(cst.partition_specs(mesh, 3), lambda s: True) == P(None, None, None)


def test_shardings_divide_the_shape_or_not_as_asked() -> None:
    shape = (6, 4, 5)
    for sharding in collect(cst.shardings(shape=shape), 200):
        assert cst.spec_divides(sharding.spec, sharding.mesh, shape)
        sharding.shard_shape(shape)  # JAX agrees
    undivided = collect(cst.shardings(shape=shape, divisible=False), 200)
    assert all(not cst.spec_divides(s.spec, s.mesh, shape) for s in undivided)
    with pytest.raises(ValueError):
        undivided[0].shard_shape(shape)


def test_sharded_arrays_reach_every_placement_and_keep_dtype_shape_and_layout() -> None:
    sharding = NamedSharding(mesh_2x4(), P("cols", "rows"))
    drawn = collect(
        cst.sharded_arrays(
            dtype=st.sampled_from(["bfloat16", "int8", "complex64"]),
            shape=(8, 2),
            sharding=sharding,
            placements=cst.ARRAY_PLACEMENTS,
        ),
        120,
    )
    seen = set()
    for a in drawn:
        assert a.shape == (8, 2) and a.dtype in (np.dtype(ml_dtypes.bfloat16), np.int8, np.complex64)
        if isinstance(a, np.ndarray):
            seen.add("numpy")
        elif a.sharding == sharding:
            seen.add("sharded")
        elif a.committed:
            seen.add("device")
        else:
            seen.add("uncommitted")
    assert seen == set(cst.ARRAY_PLACEMENTS)
    only = collect(cst.sharded_arrays(shape=(8, 2), sharding=sharding), 20)
    assert all(isinstance(a, jax.Array) and a.sharding == sharding for a in only)
    assert collect(cst.values(dtype="int16", shape=(3, 0, 2)), 5)[0].shape == (3, 0, 2)


INVALID = [
    lambda: cst.meshes(ndims=(0,)),
    lambda: cst.meshes(ndims=(2.0,)),  # type: ignore[arg-type]
    lambda: cst.meshes(min_axis_size=0),
    lambda: cst.meshes(axis_names=()),
    lambda: cst.meshes(axis_names=("x", "x")),
    lambda: cst.meshes(axis_names="xy"),
    lambda: cst.meshes(axis_names=("x", "y"), ndims=(3,)),
    lambda: cst.meshes(axis_names=("x",), kind="2d"),
    lambda: cst.meshes(kind="3d"),
    lambda: cst.meshes(ndims=(2,), min_axis_size=2, max_size=3),  # no mesh of 1..3 devices has two axes of 2
    lambda: cst.values(dtype="float32"),  # neither a length nor a shape
    lambda: cst.values(dtype="float32", length=3, shape=(3,)),
    lambda: cst.values(dtype="float32", shape=(2, -1)),
    lambda: cst.values(dtype="not-a-dtype", length=1),
    lambda: cst.partition_specs("mesh", 1),  # type: ignore[arg-type]
    lambda: cst.partition_specs(mesh_2x4(), -1),
    lambda: cst.partition_specs(mesh_2x4(), 2, shape=(4,)),
    lambda: cst.partition_specs(mesh_2x4(), 1, divisible=False),  # needs a shape
    lambda: cst.partition_specs(mesh_2x4(), 1, shape=(8,), divisible=False),  # 2 and 4 both divide 8
    lambda: cst.partition_specs(mesh_2x4(), 1, divisible="yes"),  # type: ignore[arg-type]
    lambda: cst.shardings(),
    lambda: cst.shardings(ndim=2, shape=(4,)),
    lambda: cst.shardings(ndim=1, divisible=False),
    lambda: cst.shardings(shape=(4,), mesh="mesh"),  # type: ignore[arg-type]
    lambda: cst.sharded_arrays(shape=(4,), placements=()),
    lambda: cst.sharded_arrays(shape=(4,), placements=["gpu"]),
    lambda: cst.sharded_arrays(shape=(4,), sharding="P('x')"),  # type: ignore[arg-type]
    lambda: cst.sharded_arrays(shape=(3,), sharding=NamedSharding(mesh_2x4(), P("cols"))),
    lambda: cst.sharded_arrays(shape=(2, 2.5)),  # type: ignore[arg-type]
    lambda: cst.sharded_arrays(shape=(4,), dtype="U4"),
    lambda: cst.dtypes(contract="bogus"),
    lambda: cst.dtypes(contract="full", x64="yes"),  # type: ignore[arg-type]
    lambda: cst.dtypes(contract="seed", sizes=32),
    lambda: cst.cases(contract="bogus"),
    lambda: cst.cases(mesh_kinds=["5d"]),
    lambda: cst.cases(max_length=-1),
]


@pytest.mark.parametrize("make", INVALID, ids=range(len(INVALID)))
def test_invalid_arguments_of_the_library_raise_invalid_argument_when_called(make: Any) -> None:
    with pytest.raises(InvalidArgument):
        make()


def test_too_few_devices_say_how_to_get_more() -> None:
    with pytest.raises(InvalidArgument, match="--host-devices N"):
        draw_once(cst.meshes(min_size=16))


# ---------------------------------------------------------------------------
# Assertions


def _fails(match: str, fn: Any, *args: Any, **kwargs: Any) -> AssertionFailed:
    with pytest.raises(AssertionFailed, match=match) as info:
        fn(*args, **kwargs)
    text = str(info.value)
    assert "  expected: " in text and "  got:      " in text, text
    assert info.value.kind in KINDS, info.value.kind
    return info.value


def test_assert_values_equal_is_bit_exact_with_the_nan_and_flush_rules() -> None:
    f32 = np.array([np.nan, -0.0, 1e-45, 3.0], np.float32)
    assert_values_equal(np.array([-np.nan, -0.0, 0.0, 3.0], np.float32), f32)  # any NaN; flushed subnormal
    _fails(
        r"1 of 4 elements .* at \[1\]", assert_values_equal, np.array([np.nan, 0.0, 0, 3], np.float32), f32
    )
    _fails("elements", assert_values_equal, np.array([np.nan, -0.0, -0.0, 3], np.float32), f32)  # sign kept
    _fails("elements", assert_values_equal, np.array([np.nan, -0.0, 0, 3], np.float32), f32, flush=False)
    _fails("wrong dtype", assert_values_equal, f32.astype(np.float64), f32)
    _fails("wrong shape", assert_values_equal, f32[:3], f32)
    grid = np.arange(6, dtype=np.int8).reshape(2, 3)
    wrong = grid.copy()
    wrong[1, 2] = -1
    failure = _fails(r"at \[1, 2\]", assert_values_equal, jnp.asarray(wrong), grid)
    assert failure.expected == "result[1, 2] = 5" and failure.got == "result[1, 2] = -1"
    c = np.array([complex(1, np.nan), complex(-0.0, 2)], np.complex64)
    assert_values_equal(c.copy(), c)
    _fails("elements", assert_values_equal, np.array([complex(1, np.nan), complex(0.0, 2)], np.complex64), c)


def test_flushed_inputs_pass_through_alternatives() -> None:
    x = np.array([1e-45, 2.0], np.float32)  # a subnormal whose triple is one too, but is flushed on input
    x[0] = np.float32(2**-126) / np.float32(2)  # whose triple is normal
    y = jax.jit(lambda v: v * 3)(x)  # XLA on CPU flushes the input: 0
    with pytest.raises(AssertionFailed):
        assert_values_equal(y, x * np.float32(3))
    assert_values_equal(y, x * np.float32(3), alternatives=[flush_subnormals(x) * np.float32(3)])


def test_assert_layout_and_shards_name_the_spec_and_the_device() -> None:
    mesh = mesh_2x4()
    target = NamedSharding(mesh, P("rows", "cols"))
    right = jax.device_put(np.zeros((4, 8), np.float32), target)
    assert_layout(right, target)
    assert_layout(
        jax.device_put(np.zeros((4, 8), np.float32), NamedSharding(mesh, P(("rows",), "cols"))), target
    )
    _fails(
        "requested layout",
        assert_layout,
        jax.device_put(np.zeros((4, 8)), NamedSharding(mesh, P("rows"))),
        target,
    )
    _fails("not a jax.Array", assert_layout, np.zeros((4, 8)), target)
    reversed_mesh = Mesh(mesh.devices[:, ::-1], mesh.axis_names)
    failure = _fails(
        "shards are not where",
        assert_shards,
        jax.device_put(np.zeros((4, 8)), NamedSharding(reversed_mesh, P("rows", "cols"))),
        target,
    )
    assert "device 0 holds [0:2, 0:2]" in failure.expected, failure


def test_assert_jit_shardings_tells_jit_from_eager_and_other_shardings() -> None:
    mesh = mesh_2x4()
    s = NamedSharding(mesh, P("rows", "cols"))
    x = jax.device_put(np.ones((4, 8), np.float32), s)
    good = jax.jit(lambda v: v + 1, in_shardings=s, out_shardings=s)
    assert_jit_shardings(good, x, in_shardings=s, out_shardings=s)
    assert_jit_shardings(jax.jit(lambda v: good(v)), x, in_shardings=None, out_shardings=s)  # nested
    _fails(
        "not with",
        assert_jit_shardings,
        jax.jit(lambda v: good(v) * 1),
        x,
        in_shardings=None,
        out_shardings=s,
    )
    _fails(
        "not computed by jax.jit",
        assert_jit_shardings,
        lambda v: jax.device_put(np.asarray(v) + 1, s),
        x,
        in_shardings=s,
        out_shardings=s,
    )
    eager = _fails(
        "not with the given", assert_jit_shardings, lambda v: v + 1, x, in_shardings=s, out_shardings=s
    )
    assert "UnspecifiedValue" in eager.got, eager  # an eager op runs as a jit given no shardings
    other = jax.jit(lambda v: v + 1, out_shardings=NamedSharding(mesh, P("rows")))
    failure = _fails(
        "not with the given shardings", assert_jit_shardings, other, x, in_shardings=s, out_shardings=s
    )
    assert "P('rows',)" in failure.got or "P('rows')" in failure.got, failure
    pair = jax.jit(lambda v: (v, v.sum()), out_shardings=(s, NamedSharding(mesh, P())))
    assert_jit_shardings(pair, x, in_shardings=None, out_shardings=[s, None])


def test_assert_compiles_once_and_input_intact() -> None:
    kept = jax.jit(lambda v: v * 2)
    x = np.arange(5, dtype=np.float32)
    assert_compiles_once(kept, x)
    _fails("compiled again", assert_compiles_once, lambda v: jax.jit(lambda w: w * 2)(v), x)
    before = x.copy()
    assert_input_intact(before, x)
    x[3] = -1
    failure = _fails("changed", assert_input_intact, before, x)
    assert failure.kind == "changed", failure
    assert failure.expected == "x[3] = 3.0 (0x40400000)", failure
    donated = jax.device_put(before)
    jax.jit(lambda v: v * 2, donate_argnums=0)(donated)
    _fails("deleted", assert_input_intact, before, donated)


# ---------------------------------------------------------------------------
# The user's own run: --host-devices / host_devices


USER_TEST = """
import jax
from hypothesis import given, settings
from conformance import strategies as cst

def test_devices(host_devices):
    assert len(host_devices) == len(jax.devices())
    print("DEVICES", len(host_devices))

@settings(max_examples=5, deadline=None)
@given(cst.meshes(min_size=2))
def test_meshes(mesh):
    assert mesh.devices.size >= 2
"""
STARTS_JAX = "import jax\n\nSTARTED = len(jax.devices())\n"
USER = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]


@pytest.mark.parametrize(
    "count",
    [
        pytest.param(
            4,
            marks=pytest.mark.background(
                "host-devices-4",
                [*USER, "{tmp}/hd_opt/test_user.py", "--host-devices", "4"],
                files={"hd_opt/test_user.py": USER_TEST},
            ),
            id="option",
        ),
        pytest.param(
            3,
            marks=pytest.mark.background(
                "host-devices-ini",
                [*USER, "{tmp}/hd_ini/test_user.py"],
                files={"hd_ini/test_user.py": USER_TEST, "hd_ini/pytest.ini": "[pytest]\nhost_devices = 3\n"},
            ),
            id="ini",
        ),
    ],
)
def test_host_devices_give_a_users_run_its_devices(bg_run: Any, count: int) -> None:
    assert bg_run.returncode == 0, bg_run
    assert f"DEVICES {count}" in bg_run.stdout, bg_run


@pytest.mark.background(
    "host-devices-none",
    [*USER, "{tmp}/hd_none/test_user.py"],
    files={"hd_none/test_user.py": USER_TEST},
)
def test_without_host_devices_a_mesh_strategy_says_how_to_get_them(bg_run: Any) -> None:
    assert bg_run.returncode == 1, bg_run
    assert (
        "needs 2 devices, but JAX has 1 devices" in bg_run.stdout and "--host-devices N" in bg_run.stdout
    ), bg_run


@pytest.mark.background(
    "host-devices-started",
    [*USER, "{tmp}/hd_late/test_user.py", "--host-devices", "4", "-p", "hd_starts_jax"],
    files={"hd_late/test_user.py": USER_TEST, "hd_starts_jax.py": STARTS_JAX},
)
def test_host_devices_refuse_a_backend_started_with_fewer(bg_run: Any) -> None:
    assert bg_run.returncode == 4, bg_run  # a usage error, not a run on 1 device
    assert "--host-devices 4" in bg_run.stderr and "already running with 1" in bg_run.stderr, bg_run


BROKEN_LAYOUT_TEST = """
import jax
import numpy as np
from hypothesis import given, settings
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from conformance import strategies as cst
from conformance.assertions import assert_layout


def halve(x, mesh):  # asked to lay the result out over 'data'; replicates it instead
    return jax.jit(lambda v: v / 2, out_shardings=NamedSharding(mesh, P()))(x)


@settings(max_examples=10, deadline=None)
@given(cst.meshes(ndims=(1,)))
def test_halve_layout(mesh):
    x = np.arange(2.0 * mesh.devices.size, dtype=np.float32)
    assert_layout(halve(x, mesh), NamedSharding(mesh, P("data")))


def test_devices(host_devices):
    assert len(host_devices) >= 1
"""


@pytest.mark.background(
    "broken-layout-one-device",
    [*USER, "{tmp}/broken_one/test_halve.py"],
    files={"broken_one/test_halve.py": BROKEN_LAYOUT_TEST},
)
def test_a_broken_layout_on_one_unasked_device_fails_saying_how_to_get_devices(bg_run: Any) -> None:
    # One device makes every layout look right: the strategy and the fixture refuse it, not pass.
    assert bg_run.returncode == 1, bg_run
    assert "1 failed, 1 error" in bg_run.stdout, bg_run
    assert "meshes() would test on one device only" in bg_run.stdout, bg_run
    assert "the host_devices fixture would test on one device only" in bg_run.stdout, bg_run
    assert "--host-devices N" in bg_run.stdout, bg_run


@pytest.mark.background(
    "broken-layout-eight-devices",
    [*USER, "{tmp}/broken_eight/test_halve.py", "--host-devices", "8"],
    files={"broken_eight/test_halve.py": BROKEN_LAYOUT_TEST},
)
def test_a_broken_layout_on_eight_devices_fails_naming_the_layout(bg_run: Any) -> None:
    assert bg_run.returncode == 1, bg_run
    assert "1 failed, 1 passed" in bg_run.stdout, bg_run
    assert "the result does not have the requested layout" in bg_run.stdout, bg_run
    assert "P())" in bg_run.stdout and "mesh_from_ids(" in bg_run.stdout, bg_run


def _readme_example() -> str:
    """The test file in the README's "Testing your own sharded functions", as written there."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## Testing your own sharded functions", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.background(
    "readme-example",
    [*USER, "{tmp}/readme_example/test_scale.py", "--host-devices", "8"],
    files={"readme_example/test_scale.py": _readme_example()},
)
def test_the_readme_example_runs_as_written(bg_run: Any) -> None:
    assert bg_run.returncode == 0, bg_run
    assert "1 passed" in bg_run.stdout, bg_run
