"""Declared contracts' classes of inputs: every placement kind an ``Argument`` names reaches the
function, made as it says, and so does every mesh class; every run gives one example of each
(``Kit.search``)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from conformance._src.calling.devices import other_memory_kinds
from conformance._src.declared import draw
from conformance.contracts import Argument, Contract, ContractError

ROWS = P("data", None)
EVERY = ("layouts", "numpy", "uncommitted", "device", "elsewhere", "memory-kinds", "numpy-forms")
# How a failure block names each kind.
WORDS = {
    "layouts": "committed to P(",
    "numpy": "a NumPy array",
    "uncommitted": "an uncommitted jax.Array",
    "device": "committed to device",
    "elsewhere": "mesh_from_ids(",
    "memory-kinds": "in memory kind",
    "numpy-forms": "a NumPy array (",
}


def _contract(placements: tuple[str, ...] = EVERY, *, mesh: str = "keyword") -> Contract:
    return Contract(
        name="identity",
        arguments=[Argument("x", rank=2, dtypes=("float32",), layouts=(ROWS,), placements=placements)],
        mesh_axes=("data",),
        mesh=mesh,
        out=ROWS,
        oracle=lambda x: x,
    )


def _kind_of(arg: object, call: draw.Call) -> str:
    """The placement kind an argument was made in, read from the array itself."""
    if isinstance(arg, np.ndarray):
        return "numpy"
    assert isinstance(arg, jax.Array)
    if not arg.committed:
        return "uncommitted"
    sharding = arg.sharding
    if not isinstance(sharding, NamedSharding):
        return "device"
    if sharding.memory_kind not in (None, jax.devices()[0].default_memory().kind):
        return "memory-kinds"
    if list(sharding.mesh.devices.flat) != list(call.mesh.devices.flat):
        return "elsewhere"
    return "layouts"


@pytest.mark.parametrize("kind", EVERY)
def test_each_kind_is_made_as_it_says(kind: str) -> None:
    contract = _contract()

    @settings(max_examples=15, deadline=None, database=None)
    @given(st.data())
    def one(data: st.DataObject) -> None:
        call = data.draw(draw.calls(contract, placement=kind))
        placed = call.placements[0]
        made = "numpy" if kind == "numpy-forms" else kind  # a NumPy array, of one of NUMPY_FORMS
        assert placed.kind == made and bool(placed.form) == (kind == "numpy-forms")
        (arg,) = call.arguments()
        assert _kind_of(arg, call) == made, (placed, call.describe())
        np.testing.assert_array_equal(np.asarray(arg), call.hosts[0])
        if kind == "elsewhere":
            assert placed.ids != tuple(int(d.id) for d in call.mesh.devices.flat)
        if kind == "memory-kinds":
            assert arg.sharding.memory_kind in other_memory_kinds()
        if placed.form in ("strided", "reversed"):
            assert arg.base is not None  # a view
        if placed.form == "byteswapped":
            assert not arg.dtype.isnative
        if placed.form == "readonly":
            assert not arg.flags.writeable
        assert WORDS[kind] in call.describe().split("; mesh ")[0]

    one()


def test_the_default_placements_draw_only_layouts_and_numpy() -> None:
    contract = _contract(("layouts", "numpy"))
    seen: set[str] = set()

    @settings(max_examples=40, deadline=None, database=None)
    @given(draw.calls(contract))
    def one(call: draw.Call) -> None:
        seen.add(call.placements[0].kind)

    one()
    assert seen == {"layouts", "numpy"}


def test_the_same_placement_is_the_same_key_and_another_is_not() -> None:
    contract = _contract()
    mesh = jax.make_mesh((2,), ("data",), devices=jax.devices()[:2])
    form = draw.Form(((4, 3),), ("float32",))
    host = (np.zeros((4, 3), np.float32),)
    one = draw.Call(contract, mesh, host, (draw.Placed("elsewhere", ROWS, ids=(3, 5)),))
    again = draw.Call(contract, mesh, host, (draw.Placed("elsewhere", ROWS, ids=(3, 5)),))
    other = draw.Call(contract, mesh, host, (draw.Placed("elsewhere", ROWS, ids=(5, 3)),))
    assert one.key() == again.key() != other.key()
    assert form.shapes[0] == host[0].shape


def test_mesh_from_inputs_takes_only_committed_layouts() -> None:
    assert _contract(("layouts", "memory-kinds"), mesh="inputs").mesh == "inputs"
    for kind in ("numpy", "uncommitted", "device", "elsewhere"):
        with pytest.raises(ContractError, match=r"^Argument\('x'\)\.placements="):
            _contract(("layouts", kind), mesh="inputs")


@pytest.mark.parametrize("kind", ["one-device", "contract-axes", "extra-axis"])
def test_each_mesh_class_is_what_it_says(kind: str) -> None:
    contract = _contract()

    @settings(max_examples=15, deadline=None, database=None)
    @given(draw.calls(contract, mesh_kind=kind))
    def one(call: draw.Call) -> None:
        mesh = call.mesh
        assert "data" in mesh.axis_names
        if kind == "one-device":
            assert mesh.devices.size == 1
        elif kind == "contract-axes":
            assert mesh.axis_names == ("data",) and mesh.devices.size >= 2
        else:
            assert len(mesh.axis_names) == 2 and min(mesh.devices.shape) >= 2

    one()


def test_every_search_starts_with_one_example_of_each_class() -> None:
    from conformance._src.running.kit import Kit as Engine

    asked: list[dict[str, str]] = []

    class Kit(Engine):
        def _search(self, strategy: object, body: object, *, examples: int, salt: str) -> int:
            return 1

    def strategy(**cell: str) -> object:
        asked.append(cell)
        return None

    contract = _contract(("layouts", "numpy", "device"))
    kit = Kit.__new__(Kit)
    kit.contract, kit.profile = contract, "default"
    assert kit.search(strategy, lambda _: None) == 7
    assert asked == [
        {"placement": "layouts"},
        {"placement": "numpy"},
        {"placement": "device"},
        {"mesh_kind": "one-device"},
        {"mesh_kind": "contract-axes"},
        {"mesh_kind": "extra-axis"},
        {},
    ]


def test_a_mesh_class_the_devices_cannot_make_is_left_out_by_name() -> None:
    """A run without one of the mesh classes did not judge the whole contract: each check's
    record says so (its status PARTIAL), with the devices that class needs."""
    assert len(jax.devices()) == 8
    assert draw.out_of_reach(_contract()) == []  # one axis and one more, each of 2: 4 devices
    three = Contract(
        name="three",
        arguments=[Argument("x", rank=3, dtypes=("float32",), layouts=(P("a", "b", "c"),))],
        mesh_axes=("a", "b", "c"),
        out=P("a", "b", "c"),
        oracle=lambda x: x,
    )
    (line,) = draw.out_of_reach(three)
    assert line.startswith("inputs on extra-axis meshes (the contract's 3 axes and one more")
    assert line.endswith("they need 16 devices, there are 8 (--devices 16)")


# ---------------------------------------------------------------------------
# What a contract says of its inputs' sides and values (issue 42, items 2-4)


def _sides_contract(**fields: object) -> Contract:
    """x (m, k) split by rows, w (k, n) replicated: w's rows are x's columns, its columns free."""
    return Contract(
        name="matmul",
        arguments=[
            Argument("x", rank=2, dtypes=("float32", "int32"), layouts=(ROWS,)),
            Argument(
                "w", shape=lambda x: (x[1], None), layouts=(P(None, None),), values=fields.pop("values", {})
            ),
        ],
        mesh_axes=("data",),
        out=ROWS,
        oracle=lambda x, w: x @ w,
        **fields,  # type: ignore[arg-type]
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_side_tied_per_dimension_follows_the_first_argument_and_the_free_one_is_drawn(
    data: st.DataObject,
) -> None:
    contract = _sides_contract(max_side=12)
    call = data.draw(draw.calls(contract))
    x, w = call.hosts
    assert w.shape[0] == x.shape[1] and 1 <= w.shape[1] <= 12


def test_a_free_side_varies_on_its_own() -> None:
    from hypothesis import find

    contract = _sides_contract(max_side=12)
    find(
        draw.calls(contract),
        lambda c: c.hosts[1].shape[1] != c.hosts[0].shape[0],
        settings=settings(max_examples=200),
    )


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_the_stated_largest_side_holds_over_every_mesh_of_a_history(data: st.DataObject) -> None:
    """A history over several meshes splits a side into parts whose least common multiple may be
    past max_side (2, 3 and 5 parts: 30); the draw keeps every side within it, and calls a form only
    on the meshes it fits."""
    import dataclasses

    contract = dataclasses.replace(_contract(), max_side=8)
    history = data.draw(draw.histories(contract))
    for call in history.calls:
        assert max(call.hosts[0].shape) <= 8, call.hosts[0].shape
        assert draw.fits(contract, draw.Form((call.hosts[0].shape,), ("float32",)), call.mesh)


def test_value_controls_per_dtype() -> None:
    """int32 over its whole range (wrap-around reachable), float32 within [-1, 1]."""
    from hypothesis import find

    from conformance.contracts import by_dtype

    wide = by_dtype(
        int32={"min_value": -(2**31), "max_value": 2**31 - 1}, float32={"min_value": -1.0, "max_value": 1.0}
    )
    contract = Contract(
        name="cumsum",
        arguments=[Argument("x", rank=2, dtypes=("float32", "int32"), layouts=(ROWS,), values=wide)],
        mesh_axes=("data",),
        out=ROWS,
        oracle=lambda x: np.cumsum(x, axis=1, dtype=x.dtype),
    )
    find(draw.calls(contract, dtype="int32"), lambda c: np.abs(c.hosts[0].astype(np.int64)).max() > 2**30)

    @settings(max_examples=30, deadline=None)
    @given(draw.calls(contract, dtype="float32"))
    def floats_within(call: draw.Call) -> None:
        assert np.abs(call.hosts[0]).max(initial=0) <= 1.0

    floats_within()
    with pytest.raises(ContractError, match=r"values"):
        Argument("x", rank=1, dtypes=("int32",), layouts=(P("data"),), values=by_dtype(int32=5))


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_the_planned_moves_raise_between_calls_on_a_mesh_that_can(data: st.DataObject) -> None:
    """A contract whose first layout splits over one of two axes: the planned history's call that
    must raise comes on a mesh that splits that axis (a drawn one may leave it of size 1)."""
    from conformance._src.declared import history

    contract = Contract(
        name="rows",
        arguments=[Argument("x", rank=2, dtypes=("float32",), layouts=(P("batch", None),))],
        mesh_axes=("model", "batch"),
        out=P("batch", None),
        oracle=lambda x: x,
        raises=ValueError,
    )
    steps = data.draw(history.moves(contract))
    assert any(step.raises for step in steps), [s.describe() for s in steps]


def test_a_short_max_side_leaves_every_planned_history_drawable() -> None:
    """max_side=2 on 8 devices: the planned histories keep to meshes that split a side into 2
    parts at most (a stale history over longer splits would be undrawable, a failure of the kit)."""
    import dataclasses

    from conformance._src.declared import history

    contract = dataclasses.replace(_contract(), max_side=2, raises=ValueError)

    for plan in (history.stale, history.moves, history.depth):

        @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))  # as the kit
        @given(plan(contract))
        def drawn(steps: list[history.Step]) -> None:
            for step in steps:
                assert max(step.call.hosts[0].shape) <= 2, step.describe()

        drawn()
