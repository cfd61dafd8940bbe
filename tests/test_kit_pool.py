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
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from conformance.calls import Outcome
from conformance.case import Case, make_input, make_mesh
from conformance.pool import Pool, key

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
