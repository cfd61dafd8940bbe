"""The pool shares one call per distinct input between checks, and never two different inputs.

A check judging another input's call would give a verdict about the wrong
input; a check calling again for the same input only costs time.  So: equal
keys only for inputs that are equal in every respect a call depends on, one
call per key, and widened strategies that still draw fresh examples.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from conformance._src.calling.calls import Outcome
from conformance._src.inputs.case import Case, make_input, make_mesh
from conformance._src.running.pool import Pool, key, size_of

BASE = Case(np.arange(8, dtype=np.float32))


def _counting_call() -> tuple[list[Case], Any]:
    made: list[Case] = []

    def call(case: Case) -> tuple[Any, Outcome]:
        made.append(case)
        return f"x{len(made)}", Outcome(result=f"result{len(made)}")

    return made, call


def test_one_call_per_distinct_input() -> None:
    pool = Pool()
    made, call = _counting_call()
    first = pool.observe(BASE, call)
    again = pool.observe(Case(np.arange(8, dtype=np.float32)), call)  # equal, another object
    assert made == [BASE]
    assert first[:2] == again[:2] == ("x1", Outcome(result="result1"))
    assert (first[2], again[2]) == (False, True)


def test_inputs_that_differ_in_anything_a_call_sees_get_their_own_call() -> None:
    mesh = make_mesh([0, 1, 2, 3], (2, 2), ("data", "model"))
    variants = [
        BASE,
        dataclasses.replace(BASE, values=BASE.values.copy() + 1),  # values
        dataclasses.replace(BASE, values=BASE.values.view(np.int32)),  # same bytes, other dtype
        dataclasses.replace(BASE, values=np.arange(9, dtype=np.float32)[:8]),  # equal values: shared
        dataclasses.replace(BASE, values=np.concatenate([BASE.values, BASE.values])),  # length
        dataclasses.replace(BASE, mesh_arg="none"),  # pjit_double(x, mesh=None) vs pjit_double(x)
        dataclasses.replace(BASE, mesh=mesh, mesh_arg="mesh"),
        dataclasses.replace(BASE, mesh=make_mesh([0, 1, 2, 3], (2, 2), ("model", "data")), mesh_arg="mesh"),
        dataclasses.replace(BASE, mesh=make_mesh([3, 2, 1, 0], (2, 2), ("data", "model")), mesh_arg="mesh"),
        dataclasses.replace(BASE, mesh=make_mesh([0, 1, 2, 3], (4,), ("data",)), mesh_arg="mesh"),
        dataclasses.replace(BASE, placement=("numpy",)),
        dataclasses.replace(BASE, placement=("device", 3)),
        dataclasses.replace(BASE, placement=("sharded", (0, 1), "split")),
        dataclasses.replace(BASE, placement=("sharded", (0, 1), "replicated")),
    ]
    keys = [key(v) for v in variants]
    assert keys[3] == keys[0]
    assert len(set(keys)) == len(variants) - 1
    pool = Pool()
    made, call = _counting_call()
    for v in variants:
        pool.observe(v, call)
    assert len(made) == len(variants) - 1


def test_widen_draws_fresh_and_earlier_examples_only_where_reuse_allows() -> None:
    pool = Pool()
    fresh = st.integers(1000, 2000).map(lambda n: Case(np.zeros(n, np.float32)))
    assert pool.widen(fresh, lambda e: True) is fresh  # nothing earlier yet
    earlier = [Case(np.zeros(n, np.float32)) for n in (3, 5, 7)]
    for case in earlier:
        pool.remember(case)
    pool.remember(earlier[0])  # remembered once
    assert pool.examples == earlier
    widened = pool.widen(fresh, lambda e: e.n != 5)
    quiet = settings(database=None, suppress_health_check=list(HealthCheck), max_examples=500)
    assert find(widened, lambda c: c.n >= 1000, settings=quiet).n >= 1000
    assert find(widened, lambda c: c.n == 7, settings=quiet) is earlier[2]
    never = settings(database=None, max_examples=300, suppress_health_check=list(HealthCheck))

    @never
    @given(widened)
    def no_rejected_example(case: Case) -> None:
        assert case.n != 5

    no_rejected_example()
    assert pool.is_earlier(earlier[1]) and not pool.is_earlier(Case(np.zeros(4, np.float32)))


def test_inputs_never_alias_the_cases_values() -> None:
    """The pool keeps cases' values for later checks: a device buffer that is that
    memory would let one call's input writes reach another check's input."""
    for placement in [
        ("uncommitted",),
        ("device", 2),
        ("sharded", (0, 1), "split"),
        ("sharded", (1,), "replicated"),
    ]:
        case = dataclasses.replace(BASE, values=np.arange(4096, dtype=np.float32), placement=placement)
        x = make_input(case)
        start = case.values.ctypes.data
        for shard in x.addressable_shards:
            pointer = shard.data.unsafe_buffer_pointer()
            assert not start <= pointer < start + case.values.nbytes, placement


def _sized_call(nbytes: int) -> tuple[list[Case], Any]:
    """Calls whose results hold ``nbytes`` bytes each: the case's values doubled, then padded."""
    made: list[Case] = []

    def call(case: Case) -> tuple[Any, Outcome]:
        made.append(case)
        result = np.zeros(max(nbytes // case.values.itemsize, case.n), case.dtype)
        result[: case.n] = case.values * 2
        return case.values.copy(), Outcome(result=result)

    return made, call


def test_calls_are_kept_within_the_budget_least_recently_used_dropped_first() -> None:
    pool = Pool(budget=10_000)
    made, call = _sized_call(3000)  # each call keeps 3000 bytes of result + 32 bytes of input
    cases = [Case(np.arange(8, dtype=np.float32) + i) for i in range(4)]
    for case in cases[:3]:
        pool.observe(case, call)
    assert [pool.is_kept(c) for c in cases[:3]] == [True, True, True]
    assert pool.kept_bytes == 3 * (3000 + 32) <= pool.budget
    pool.observe(cases[0], call)  # a hit: cases[0] is now the most recently used
    pool.observe(cases[3], call)  # past the budget: cases[1], the least recently used, goes
    assert [pool.is_kept(c) for c in cases] == [True, False, True, True]
    assert pool.kept_bytes <= pool.budget
    assert (len(made), pool.calls, pool.recalls) == (4, 4, 0)
    _, outcome, shared = pool.observe(cases[1], call)  # dropped: called again, and counted
    assert not shared and made[-1] is cases[1] and (pool.calls, pool.recalls) == (5, 1)
    assert np.array_equal(outcome.result[:8], cases[1].values * 2)
    assert pool.is_kept(cases[1]) and pool.kept_bytes <= pool.budget


def test_a_call_bigger_than_the_budget_is_never_kept() -> None:
    pool = Pool(budget=10_000)
    made, call = _sized_call(20_000)
    first = pool.observe(BASE, call)
    assert first[1].result.nbytes == 20_000 and not first[2]
    assert not pool.is_kept(BASE) and pool.kept_bytes == 0
    second = pool.observe(BASE, call)  # asked again: a new call, not the first one's result
    assert len(made) == 2 and not second[2] and second[1] is not first[1]
    assert (pool.calls, pool.recalls) == (2, 1)
    # Its example is still offered to later checks: only the result is dropped.
    assert pool.examples == [BASE] and pool.is_earlier(BASE)


def test_size_of_counts_bytes_without_touching_elements() -> None:
    assert size_of(np.zeros(1000, np.float64)) == 8000
    assert size_of(None) < 100
    assert size_of([np.zeros(10, np.int8)] * 3) >= 30
    assert size_of(list(range(10**5))) >= 32 * 10**5  # estimated, not summed
    x = make_input(dataclasses.replace(BASE, placement=("sharded", (0, 1), "replicated")))
    assert size_of(x) == 2 * BASE.values.nbytes  # one copy per device


def test_a_dropped_result_is_judged_again_with_the_same_verdict() -> None:
    """The kit on a wrong implementation, with a budget smaller than any result: every
    check that asks for the same input calls again, and fails the same way."""
    import jax

    from conformance._src.calling.calls import Runner
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CHECKS, CheckFailure
    from conformance._src.declared.terms import named
    from conformance._src.running.kit import Kit

    def padded(x: Any, *, mesh: Any = None) -> Any:
        return jax.numpy.concatenate([x + x, jax.numpy.zeros(64, x.dtype)])

    case = Case(np.arange(8, dtype=np.float32))
    verdicts = []
    for budget in (2**20, 0):
        kit = Kit(padded, "padded", named("seed"), 8, Runner(timeout=60), pool=Pool(budget=budget))
        messages = []
        for check_id in ("result.type", "values.float32", "result.type"):
            kit.check_id = check_id
            with pytest.raises(CheckFailure) as failure:
                CHECKS[check_id].body(kit, case)
            messages.append(str(failure.value).splitlines()[:4])
        verdicts.append((messages, kit.runner.stats.calls, kit.pool.calls, kit.pool.recalls))
    kept, dropped = verdicts
    assert kept[0] == dropped[0]  # the same failures, message for message
    assert "wrong shape" in kept[0][0][0] and "shape (72,)" in kept[0][0][3]
    assert kept[1:] == (1, 1, 0)  # one call, shared by the three checks
    assert dropped[1:] == (3, 3, 2)  # one call per check: every result was dropped


def test_the_shared_pass_holds_one_call_over_the_budget_until_it_is_judged() -> None:
    """In the shared pass every check judges the same call: one call per input, whatever its
    size, and at most one result over the budget alive (dropped before the next call)."""
    import gc
    import weakref

    pool = Pool(budget=10_000)
    made, sized = _sized_call(20_000)
    alive: list[weakref.ref[Any]] = []

    def call(case: Case) -> tuple[Any, Outcome]:
        gc.collect()
        assert all(ref() is None for ref in alive), "a held result outlived the next call"
        x, outcome = sized(case)
        alive.append(weakref.ref(outcome.result))
        return x, outcome

    other = Case(np.arange(8, dtype=np.float32) + 1)
    pool.hold()
    first = pool.observe(BASE, call)
    again = pool.observe(BASE, call)  # the next check of the pass: the same call
    assert len(made) == 1 and again[2] and again[1] is first[1] and pool.is_kept(BASE)
    assert pool.kept_bytes == 0  # held, not counted in the budget's calls
    del first, again
    pool.observe(other, call)  # another input: the held call is dropped before it is made
    assert not pool.is_kept(BASE) and pool.is_kept(other)
    pool.drop_held()  # every check judged it
    gc.collect()
    assert not pool.is_kept(other) and all(ref() is None for ref in alive)
    pool.observe(other, call)
    pool.release()  # the pass is over: nothing held, and nothing over the budget held again
    assert not pool.is_kept(other)
    pool.observe(other, call)
    assert not pool.is_kept(other) and (len(made), pool.recalls) == (4, 2)


def test_a_failure_kept_by_hypothesis_does_not_keep_the_result_it_judged() -> None:
    """Hypothesis keeps every failing example's exception until its search ends, and a
    traceback keeps its frames' locals: by the next call, the frames are cleared."""
    import gc
    import weakref

    from conformance._src.calling.calls import Runner
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CheckFailure
    from conformance._src.declared.terms import named
    from conformance._src.running.kit import Kit

    def huge(x: Any, *, mesh: Any = None) -> Any:
        return np.ones(2**20, np.float32)  # 4 MiB, the wrong shape

    kit = Kit(huge, "huge", named("seed"), 8, Runner(timeout=60))
    kit.check_id = "result.type"
    kept: list[BaseException] = []  # what Hypothesis's example cache holds
    results: list[weakref.ref[Any]] = []

    def step(case: Case) -> None:
        _, result = kit.result(case)
        results.append(weakref.ref(result))
        kit.fail("the result has the wrong shape", case, expected="shape (8,)", got=f"shape {result.shape}")

    for i in range(3):
        try:
            step(Case(np.arange(8, dtype=np.float32) + i))
        except CheckFailure as failure:
            kept.append(failure)
    gc.collect()
    assert [ref() is None for ref in results] == [True, True, False]  # the last: not yet a call since
    kit.call(BASE)
    gc.collect()
    assert all(ref() is None for ref in results)
    assert all(isinstance(f.__traceback__, object) and "wrong shape" in str(f) for f in kept)
