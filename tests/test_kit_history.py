"""Histories of calls (history.py), mesh classes (coverage.MeshClass, schedule.mesh_variants) and
what the jit probe reads from a real call (the doubling's input, ahead-of-time executables)."""

from __future__ import annotations

import itertools
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from conformance._src import internals
from conformance._src.contract import oracle
from conformance._src.declared.terms import data_axis_size, named
from conformance._src.inputs import coverage, history
from conformance._src.inputs.case import Case, decode_history, encode_history, make_mesh, parse_history
from conformance._src.inputs.coverage import MeshClass, mesh_class
from conformance._src.inputs.schedule import Schedule, build_mesh, mesh_variants
from conformance._src.library import jit_probe

DEVICES = 8


# -- mesh classes and the schedule's pairwise covering ---------------------------------------


def test_mesh_classes_read_the_data_axis_the_order_and_the_position() -> None:
    every = list(range(DEVICES))
    assert mesh_class(None) == MeshClass("one", "prefix", "first")
    assert mesh_class(make_mesh(every[:4], (4,), ("data",))) == MeshClass("power-of-two", "prefix", "first")
    assert mesh_class(make_mesh([2, 1, 0], (3,), ("data",))) == MeshClass("odd", "permuted", "first")
    assert mesh_class(make_mesh([7, 1, 2, 3, 4, 5], (6,), ("data",))).data_size == "even-other"
    assert mesh_class(make_mesh([7, 1, 2, 3, 4, 5], (6,), ("data",))).order == "subset"
    assert mesh_class(make_mesh(every[:6], (2, 3), ("model", "data"))) == MeshClass("odd", "prefix", "second")


@pytest.mark.parametrize("kind", ["1d", "2d", "2d-data1"])
def test_every_variant_of_a_kind_builds_a_mesh_of_that_kind_and_class(kind: str) -> None:
    import random

    variants = mesh_variants(kind, DEVICES)
    assert {v.order for v in variants} == set(coverage.ORDERS)
    for klass in variants:
        for seed in range(5):
            mesh = build_mesh(kind, klass, random.Random(seed))
            assert coverage.mesh_kind(mesh) == kind, (klass, mesh)
            assert mesh_class(mesh) == klass, (klass, mesh)


def test_every_data_size_class_and_position_is_a_variant_on_eight_devices() -> None:
    sizes = {
        v.data_size for kind in ("default", "1d", "2d", "2d-data1") for v in mesh_variants(kind, DEVICES)
    }
    positions = {v.position for kind in ("2d", "2d-data1") for v in mesh_variants(kind, DEVICES)}
    assert sizes == set(coverage.DATA_SIZES) and positions == set(coverage.DATA_POSITIONS)


@pytest.mark.parametrize("seed", [0, 1, 77, 12345])
def test_the_schedule_covers_every_pair_with_a_mesh_class_axis(seed: int) -> None:
    """Over the design's cells, each placement, mesh kind and length meets every value of each
    class axis it can meet, and every two class values that a variant joins meet too: every pair
    the coverage table counts (coverage.pairs_of)."""
    schedule = Schedule(seed)
    possible: set[tuple[str, str, str, str]] = set()
    got: set[tuple[str, str, str, str]] = set()
    for cell in coverage.Axes().cells(named("full"), devices=DEVICES, seed=seed):
        for klass in mesh_variants(cell.mesh, DEVICES):
            possible |= coverage.pairs_of(cell, klass)
        got |= coverage.pairs_of(cell, mesh_class(schedule.case(cell).mesh))
    assert got == possible, sorted(possible - got)
    assert {axis for axis, *_ in possible} == {"placement", "mesh", "length", "data size", "order"}


def test_groups_of_the_schedule_keep_one_mesh_for_their_placements() -> None:
    schedule = Schedule(4)
    cells = [coverage.Cell("int16", p, "2d", "short") for p in coverage.PLACEMENTS]
    assert len({id(schedule.case(c).mesh) for c in cells}) == 1


# -- histories ------------------------------------------------------------------------------


def _case(ids: list[int], n: int, placement: tuple[object, ...] = ("uncommitted",)) -> Case:
    mesh = make_mesh(ids, (len(ids),), ("data",))
    return Case(np.arange(n, dtype=np.float32), mesh, "mesh", placement)


def test_a_history_token_replays_every_call_in_order() -> None:
    steps = [_case([0, 1], 4), _case([3, 2, 1], 3, ("numpy", "readonly")), _case([0, 1], 4, ("target",))]
    token = encode_history(steps)
    back = decode_history(token)
    assert [history.call_key(c) for c in back] == [history.call_key(c) for c in steps]
    assert [c.placement for c in back] == [c.placement for c in steps]
    assert len(parse_history(token)) == 3


def test_a_case_token_is_not_a_history_token() -> None:
    from conformance._src.inputs.case import CaseTokenError, encode

    with pytest.raises(CaseTokenError, match="history"):
        parse_history(encode(_case([0], 2)))


def test_jax_may_compile_a_seen_call_only_for_a_new_kind_of_jit_argument() -> None:
    sharding = NamedSharding(Mesh(np.array(jax.devices()[:2]), ("data",)), PartitionSpec("data"))
    other = NamedSharding(Mesh(np.array(jax.devices()[:1]), ("data",)), PartitionSpec("data"))
    ran = jit_probe.Ran
    f = ["jit(f)"]
    assert not jit_probe.compile_allowed(f, [ran("f", "uncommitted")], [[ran("f", "uncommitted")]])
    assert not jit_probe.compile_allowed(f, [ran("f", "uncommitted")], [[ran("f", "numpy")]])  # placed alike
    assert jit_probe.compile_allowed(f, [ran("f", sharding)], [[ran("f", "uncommitted")], [ran("f", other)]])
    assert not jit_probe.compile_allowed(f, [ran("f", sharding)], [[ran("f", "numpy")], [ran("f", sharding)]])
    assert jit_probe.compile_allowed(f, [ran("f", "numpy")], [[ran("f", sharding)]])
    assert not jit_probe.compile_allowed(f, [], [[ran("f", sharding)]])  # no jit seen: no allowance
    # A staging jit of the implementation's own given something new may compile; the doubling jit,
    # given what it was given before, may not.
    staged = [ran("copy", "numpy"), ran("f", sharding)]
    before = [[ran("copy", sharding), ran("f", sharding)]]
    assert jit_probe.compile_allowed(["jit(copy)"], staged, before)
    assert not jit_probe.compile_allowed(["jit(f)"], staged, before)


PLACED = ("numpy", "uncommitted", "target", "elsewhere")


def _placed(kind: str, values: np.ndarray, target: NamedSharding) -> object:
    if kind == "numpy":
        return values
    if kind == "uncommitted":
        return jax.numpy.asarray(values)
    if kind == "target":
        return jax.device_put(values, target)
    return jax.device_put(values, jax.devices()[-1])  # committed to another device


@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("staged", [False, True], ids=["one-jit", "staged-copy"])
def test_the_allowance_model_is_what_jax_jit_really_compiles(size: int, staged: bool) -> None:
    """Measures JAX itself, not the kit's belief about it: pre-built jits (the doubling alone, or
    a jit(copy) with the target shardings first, its output donated to the doubling), given every
    order of every placement kind, twice.  Every compile JAX makes for a seen (shape, dtype,
    mesh) is one the model allows; with one jit, it allows one exactly where JAX makes one."""
    counter = internals.compile_counter()
    for order in itertools.permutations(PLACED):
        target = NamedSharding(Mesh(np.array(jax.devices()[:size]), ("data",)), PartitionSpec("data"))
        donate = (0,) if staged else ()  # the staging copy is the implementation's to donate
        double = jax.jit(lambda v: v * 2, in_shardings=target, out_shardings=target, donate_argnums=donate)
        stage = jax.jit(jax.numpy.copy, in_shardings=target, out_shardings=target)

        def call(x: Any, double: Any = double, stage: Any = stage, target: Any = target) -> Any:
            if isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(target, 1):
                x = jax.device_put(x, target)  # committed elsewhere: placed first
            return double(stage(x) if staged else x)

        seen: list[list[jit_probe.Ran]] = []
        for step, kind in enumerate([*order, *order]):
            x = _placed(kind, np.arange(4 * size, dtype=np.float32) + step, target)
            before = len(counter.names)
            _, _, ran = jit_probe.observe(call, x)
            compiled = [n for n in counter.names[before:] if not internals.is_jax_move(n)]
            if seen:
                allowed = jit_probe.compile_allowed(compiled, ran, seen)
                assert allowed or not compiled, (order, step, compiled, ran)
                if not staged:
                    assert allowed == bool(compiled), (order, step, compiled, ran)
            seen.append(ran)


def test_only_jax_own_programs_for_moving_data_are_not_the_implementations_compiles() -> None:
    from conformance._src import internals

    assert internals.is_jax_move("jit(_multi_slice)") and internals.is_jax_move("_identity_fn")
    assert not internals.is_jax_move("jit(<lambda>)") and not internals.is_jax_move("jit(_double)")
    counter = internals.compile_counter()
    before = len(counter.names)
    x = jax.device_put(np.arange(6, dtype=np.float32) + 1)  # uncommitted, on the first device
    jax.device_put(x, NamedSharding(Mesh(np.array(jax.devices()[:2]), ("data",)), PartitionSpec("data")))
    moves = counter.names[before:]
    assert moves and all(internals.is_jax_move(name) for name in moves), moves


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(how=st.sampled_from(history.MESH_MOVES), data=st.data())
def test_every_mesh_move_makes_a_mesh_over_the_devices(how: str, data: st.DataObject) -> None:
    base = data.draw(st.sampled_from([None, make_mesh([3, 1, 4, 0], (2, 2), ("model", "data"))]))
    mesh = history.move(how, base, data.draw)
    ids = [0] if mesh is None else [int(d.id) for d in mesh.devices.flat]
    assert len(set(ids)) == len(ids) and set(ids) <= set(range(DEVICES))
    if how == "names-swapped" and base is not None:
        assert (
            mesh is not None and mesh.axis_names == ("data", "model") and (mesh.devices == base.devices).all()
        )
    if how == "inside-changed" and base is not None:
        assert mesh is not None and ids[0] == 3 and ids[-1] == 0 and mesh.devices.shape == (2, 2)


def _judge_with(impl: object) -> tuple[list[list[Case]], object]:
    """A judge_step for history.search that calls ``impl`` and fails on wrong values."""
    seen: list[list[Case]] = []
    results: list[object] = []  # each call's result (None: it raised), as the caller holds them

    def judge(earlier: list[Case], case: Case) -> bool:
        seen.append([*earlier, case])
        del results[len(earlier) :]
        if case.placement[0] == "result":  # an earlier result passed back: its values are the input
            x = results[case.placement[1] - 1]
            case = Case(np.asarray(x), case.mesh, case.mesh_arg, case.placement)
        else:
            x = case.make_input()
        if history.indivisible(case):
            with pytest.raises(ValueError):
                impl(x, **case.mesh_kwargs())  # type: ignore[operator]
            results.append(None)
            return True
        result = impl(x, **case.mesh_kwargs())  # type: ignore[operator]
        assert oracle.first_mismatch(case.values, np.asarray(result)) is None
        results.append(result)
        return True

    return seen, judge


FAST = {
    "max_examples": 6,
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
    "report_multiple_bugs": False,
}


def test_the_search_reaches_many_meshes_keys_and_deep_revisits() -> None:
    from reference import pjit_double

    seen, judge = _judge_with(pjit_double)
    reach = history.HistoryReach()
    # 20 histories: the moves besides calls (pass-back, raise-between, time) share the search.
    # Derandomized: unseeded, the most meshes in one history ranged 6-8 over runs, and a bound a
    # run may miss by chance is a flaky test (a fresh clone's run got 7).
    options = {**FAST, "max_examples": 20, "derandomize": True}
    history.search(judge, reach, contract=named("full"), options=options)  # type: ignore[arg-type]
    assert reach.histories >= 6 and reach.steps >= 60
    assert reach.most_meshes >= 8 and reach.most_keys >= 6 and reach.deep_revisits >= 1
    assert set(reach.moves) >= set(history.MESH_MOVES) - {"again"}
    for calls in seen:
        for case in calls:  # a length the data axis divides, but in the calls meant to raise
            assert history.indivisible(case) or (case.n % data_axis_size(case.mesh) == 0 and case.n > 0)


def test_every_run_plans_one_device_array_with_its_axis_names_swapped() -> None:
    """A cache keyed on the devices alone (shape, ids, order) meets, every run, two meshes it
    cannot tell apart: the same device array named ('data', 'model') and ('model', 'data')."""
    planned = history.planned(contract=named("full"))
    pairs = [
        (a.mesh, b.mesh)
        for steps in planned
        for a, b in itertools.pairwise(steps)
        if a.mesh is not None and b.mesh is not None
    ]
    swapped = [
        (a, b)
        for a, b in pairs
        if a.devices.shape == b.devices.shape
        and (a.devices == b.devices).all()
        and a.axis_names == tuple(reversed(b.axis_names))
        and a.shape["data"] != 1
        and b.shape["data"] != 1
    ]
    assert len(swapped) >= 3
    for steps in planned:
        for case in steps:  # a length the data axis divides, but in the calls meant to raise
            assert history.indivisible(case) or (case.n % data_axis_size(case.mesh) == 0 and case.n > 0)


def test_the_twin_of_a_call_is_passed_the_other_way_jit_treats_alike() -> None:
    values = np.arange(4, dtype=np.float32)
    mesh = make_mesh([0, 1], (2,), ("data",))
    host = history.twin(Case(values, None, "omit", ("numpy", "reversed")))
    assert host is not None and host.placement == ("uncommitted",) and host.mesh_arg == "none"
    placed = history.twin(Case(values, mesh, "mesh", ("uncommitted",)))
    assert placed is not None and placed.placement == ("numpy",) and placed.mesh_arg == "mesh"
    assert history.twin(Case(values, mesh, "mesh", ("target",))) is None  # committed: no twin


def test_every_step_is_followed_by_a_recall() -> None:
    from reference import pjit_double

    _, judge = _judge_with(pjit_double)
    reach = history.HistoryReach()
    history.search(judge, reach, contract=named("full"), options={**FAST, "max_examples": 4})  # type: ignore[arg-type]
    recalls = reach.moves.get("recall", 0)
    steps = (
        reach.steps - recalls - reach.moves.get("after-raise", 0)
    )  # a raise and the call after it: one rule
    assert recalls >= steps  # one recall (then its twin, where it has one) per rule


def test_a_failing_history_is_shrunk_to_the_shortest_one_hypothesis_finds() -> None:
    stale: dict[object, object] = {}

    def remembers_one_result_per_mesh(x: object, *, mesh: object = None) -> object:
        if mesh not in stale:
            stale[mesh] = np.asarray(x) * 2
        return stale[mesh]

    seen, judge_call = _judge_with(remembers_one_result_per_mesh)

    def judge(earlier: list[Case], case: Case) -> bool:
        if not earlier:
            stale.clear()  # each history starts from a fresh implementation
        return judge_call(earlier, case)  # type: ignore[operator,no-any-return]

    with pytest.raises(AssertionError):
        history.search(
            judge,
            history.HistoryReach(),
            contract=named("full"),
            options={**FAST, "max_examples": 30, "phases": list(Phase)},  # type: ignore[arg-type]
        )
    assert len(seen[-1]) == 2  # the smallest history: a call, then one that gets its result back


# -- what the jit probe reads from a real call ------------------------------------------------


def _sharding() -> NamedSharding:
    return NamedSharding(Mesh(np.array(jax.devices()[:4]), ("data",)), PartitionSpec("data"))


def test_the_probe_says_whether_the_jit_was_given_x_itself() -> None:
    s = _sharding()
    double = jax.jit(lambda v: v + v, in_shardings=s, out_shardings=s)
    identity = jax.jit(lambda v: v, in_shardings=s, out_shardings=s)
    x = np.arange(8, dtype=np.float32)
    _, chain, _ = jit_probe.observe(double, jax.device_put(x, s), input_values=x)
    assert chain and chain[0].fed is True and chain[0].argument == s
    _, chain, _ = jit_probe.observe(
        lambda v: identity(jax.device_put(np.asarray(v) * 2, s)), x, input_values=x
    )
    assert chain and chain[0].fed is False


def test_ahead_of_time_executables_are_watched_with_their_own_shardings() -> None:
    s = _sharding()
    x = np.arange(8, dtype=np.float32)
    compiled = (
        jax.jit(lambda v: v + v, in_shardings=s, out_shardings=s)
        .lower(jax.ShapeDtypeStruct((8,), np.float32, sharding=s))
        .compile()
    )
    _, chain, names = jit_probe.observe(compiled, jax.device_put(x, s), input_values=x)
    assert [r.name for r in names] == ["compiled executable"] and chain[0].ahead_of_time and chain[0].fed
    assert jit_probe.is_layout(chain[0].in_sharding, s) and jit_probe.is_layout(chain[0].out_sharding, s)
    bare = jax.jit(lambda v: v + v).lower(jax.ShapeDtypeStruct((8,), np.float32)).compile()
    _, chain, names = jit_probe.observe(lambda v: jax.device_put(bare(v), s), x, input_values=x)
    assert "compiled executable" in [r.name for r in names]  # it ran, but the result is not its output:
    assert not any(c.ahead_of_time for c in chain)  # moved after it (by JAX's own copy, if any)


@pytest.mark.parametrize(
    ("shape", "names"),
    [
        ((4,), ("data",)),
        ((2, 2), ("data", "model")),
        ((2, 3), ("model", "data")),
        ((1, 4), ("data", "model")),
    ],
)
def test_a_permuted_mesh_moves_some_shard_where_its_data_axis_can(
    shape: tuple[int, ...], names: tuple[str, ...]
) -> None:
    """Every permutation the "permuted" move draws puts some device on another shard of a split
    vector (an order among one shard's replicas, or none, places the shards as before); where
    the data axis has one device, the order still changes."""
    ids = list(range(int(np.prod(shape))))
    base = make_mesh(ids, shape, names)
    for order in itertools.permutations(ids):
        moved = history._moving_a_shard(list(order), ids, base)
        assert sorted(moved) == ids and moved != ids, (order, moved)
        if base.shape["data"] > 1:
            slots = history._data_slots(base, len(ids))
            assert any(slots[ids.index(d)] != slots[k] for k, d in enumerate(moved)), (order, moved)


# -- the moves besides calls: results passed back, errors between calls, time passing, contexts --


def test_a_history_token_keeps_results_passed_back_the_clocks_and_the_context() -> None:
    from conformance._src.inputs.case import CaseTokenError, encode, parse

    first = _case([0, 1], 4)
    steps = [
        Case(first.values, None, "omit", ("uncommitted",), under=("default_device", 3)),
        first,
        Case(first.values, first.mesh, "mesh", ("result", 2), clocks_ahead=600),
        Case(first.values, first.mesh, "mesh", ("uncommitted",), under=("set_mesh",)),
    ]
    back = decode_history(encode_history(steps))
    assert [(c.placement, c.clocks_ahead, c.under) for c in back] == [
        (c.placement, c.clocks_ahead, c.under) for c in steps
    ]
    assert "the result call 2 returned" in back[2].describe() and "10 min ahead" in back[2].describe()
    assert "jax.default_device(device 3)" in back[0].describe()
    with pytest.raises(CaseTokenError, match="earlier one"):  # a result not yet returned
        parse_history(encode_history([Case(first.values, None, "omit", ("result", 1))]))
    with pytest.raises(CaseTokenError, match="history"):  # a lone case has no results to pass back
        parse(encode(steps[2]))


def test_the_clocks_read_ahead_on_the_calling_thread_only_while_it_calls() -> None:
    import threading
    import time

    from conformance._src.calling import clocks

    seen: dict[str, float] = {}

    def other_thread() -> None:
        seen["other"] = time.time()

    before = time.time()
    with clocks.ahead(3600):
        seen["monotonic_ns"] = time.monotonic_ns() / 1e9 - time.perf_counter() + time.perf_counter()
        seen["here"] = time.time()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    after = time.time()
    assert seen["here"] - before >= 3600 and seen["other"] - before < 60 and after - before < 60
    assert time.time is not None and time.time.__module__ in ("time", None)  # the true clock is back


def test_every_run_plans_a_result_passed_back_an_error_between_calls_and_time_passing() -> None:
    passed, raised, timed = history.planned(contract=named("full"))[-3:]
    assert [c.placement for c in passed[1:]] == [("result", 1), ("result", 2)]
    assert history.indivisible(raised[1]) and history.call_key(raised[0]) == history.call_key(raised[2])
    steps = timed
    assert any(
        b.clocks_ahead > a.clocks_ahead and history.call_key(a) == history.call_key(b)
        for a, b in itertools.pairwise(steps)
    )


def test_the_search_passes_results_back_raises_between_calls_and_lets_time_pass() -> None:
    from reference import pjit_double

    _, judge = _judge_with(pjit_double)
    reach = history.HistoryReach()
    history.search(judge, reach, contract=named("full"), options={**FAST, "max_examples": 30})  # type: ignore[arg-type]
    assert reach.moves.get("pass-back") and reach.moves.get("raise-between") and reach.time_passed


def test_every_run_makes_a_first_call_under_each_context_in_a_fresh_process() -> None:
    found = history.first_calls(contract=named("full"))
    assert [steps[0].under for steps in found] == [("default_device", DEVICES - 1), ("set_mesh",)]
    assert all(not step.under for steps in found for step in steps[1:])
    assert history.first_calls(contract=named("seed")) == []  # no mesh: nothing to carry over
