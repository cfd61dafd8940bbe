"""The calls a session has made, shared between checks.

A first call with a new length, dtype or mesh compiles (~60 ms here); a
warm call costs ~0.1 ms.  Most checks judge a single call on its own: the
result's type, dtype, values, layout or shards, whether it raised, whether
x survived.  So compile time should buy new inputs, not the same input once
per check:

* ``Pool.observe`` calls the implementation once per distinct input (values,
  mesh, how it is passed, where x lives) and hands the same ``(x, outcome)``
  to every check that asks for it.  Checks about sequences of calls (stale
  results, compiles on the second call, global state) make calls of their
  own instead.
* ``Pool.widen`` lets a check draw part of its examples from what earlier
  checks ran: a strategy ``one_of(fresh, sampled_from(earlier))`` where
  ``earlier`` is every example so far that the check's ``reuse`` predicate
  accepts.  Fresh examples come first, so Hypothesis shrinks towards them.

The pool lives as long as the session (per pytest-xdist worker); the inputs
are at most a few thousand elements, so keeping them costs little memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from conformance.calls import Outcome
from conformance.case import Case, device_ids


def key(case: Case) -> tuple[Any, ...]:
    """Everything a call depends on: equal keys, interchangeable calls."""
    mesh = case.mesh
    where = None if mesh is None else (tuple(device_ids(mesh)), mesh.devices.shape, tuple(mesh.axis_names))
    digest = hashlib.blake2b(case.values.tobytes(), digest_size=16).digest()
    return (str(case.dtype), case.n, digest, where, case.mesh_arg, tuple(case.placement))


@dataclass
class Pool:
    observed: dict[tuple[Any, ...], tuple[Any, Outcome]] = field(default_factory=dict)
    examples: list[Any] = field(default_factory=list)  # Cases and groups, in the order first seen
    _keys: set[Any] = field(default_factory=set)

    def observe(self, case: Case, call: Callable[[Case], tuple[Any, Outcome]]) -> tuple[Any, Outcome, bool]:
        """``(x, outcome, shared)``: the call's, made now or by an earlier check."""
        k = key(case)
        hit = self.observed.get(k)
        if hit is not None:
            return hit[0], hit[1], True
        x, outcome = call(case)
        self.observed[k] = (x, outcome)
        self.remember(case)
        return x, outcome, False

    def remember(self, example: Any) -> None:
        """Offer ``example`` (a Case or a group of them) to later checks."""
        k = _example_key(example)
        if k not in self._keys:
            self._keys.add(k)
            self.examples.append(example)

    def widen(self, fresh: st.SearchStrategy[Any], reuse: Callable[[Any], bool]) -> st.SearchStrategy[Any]:
        """``fresh``, or (as often) an example an earlier check ran that ``reuse`` accepts."""
        earlier = [e for e in self.examples if reuse(e)]
        if not earlier:
            return fresh
        return st.one_of(fresh, st.sampled_from(earlier))

    def is_earlier(self, example: Any) -> bool:
        return _example_key(example) in self._keys


def _example_key(example: Any) -> tuple[Any, ...]:
    """Cases by what a call sees; groups by identity (the pool keeps them alive)."""
    return key(example) if isinstance(example, Case) else ("example", id(example))
