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

Memory is bounded, whatever the implementation returns.  The pool lives as
long as the session (per pytest-xdist worker) and keeps every example (host
inputs of at most a few thousand elements) and every key, but calls'
``(x, outcome)`` only while their total size stays within ``budget`` bytes
(64 MiB): the least recently used are dropped first, and a call bigger than
the budget is never kept.  A check that asks for a dropped call gets a new
call of the same input (counted like any call: the check's ``calls`` in the
report, and ``Pool.recalls`` here).  One call per distinct input is an
optimisation, not a contract: a correct implementation's results are a few
KiB and are never dropped in a default run; a wrong one returning 10**8
elements costs a call per check instead of the run's memory.

The shared pass is the exception: there every check judges the same call
one after the other, so the pass holds its current call whatever its size
(``hold``, at most one call beyond the budget) until every check has judged
it, and drops it (``release``) before the next call: a result of 10**8
elements costs one call per input, not one per check, and at most one such
result is alive.

A dropped result must give its memory back, too: ``return_large_blocks``
makes glibc's malloc hand every block of 1 MiB or more straight back to the
system when it is freed (left to itself, it raises that threshold up to
32 MiB as large blocks are freed and keeps later ones in its arenas: a run
on results of 10**8 elements ended holding 0.7 GB more that no array held,
and peaked at 2.3 GB instead of 1.5 GB).
"""

from __future__ import annotations

import ctypes
import hashlib
import sys
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from conformance._src.calling.calls import Outcome
from conformance._src.inputs.case import Case, device_ids

BUDGET = 64 * 2**20  # bytes of kept calls' inputs and results
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, glibc's malloc.h
_allocator_set = False


def return_large_blocks(threshold: int = 2**20) -> bool:
    """Have malloc return blocks of ``threshold`` bytes or more to the system when
    freed (once per process); False where the C library has no glibc ``mallopt``."""
    global _allocator_set
    if not _allocator_set:
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            return False
        _allocator_set = bool(mallopt(_M_MMAP_THRESHOLD, threshold))
    return _allocator_set


_keys: weakref.WeakKeyDictionary[Case, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def key(case: Case) -> tuple[Any, ...]:
    """Everything a call depends on: equal keys, interchangeable calls (kept per case: a long
    vector's digest costs milliseconds)."""
    found = _keys.get(case)
    if found is None:
        found = _keys[case] = _key(case)
    return found


def _key(case: Case) -> tuple[Any, ...]:
    mesh = case.mesh
    where = None if mesh is None else (tuple(device_ids(mesh)), mesh.devices.shape, tuple(mesh.axis_names))
    # The bytes themselves, not a copy of them, by the fastest digest here (an input past 32 MiB:
    # schedule.Schedule.huge_cases).
    digest = hashlib.sha256(np.ascontiguousarray(case.values).view(np.uint8).data).digest()[:16]
    return (str(case.dtype), case.n, digest, where, case.mesh_arg, tuple(case.placement))


def size_of(value: Any) -> int:
    """Bytes ``value`` holds, without touching its elements (an estimate past arrays).

    A jax.Array counts every addressable shard (a replicated result holds one
    copy per device); anything with ``nbytes`` counts that; a list or tuple
    counts its items (those with ``nbytes`` exactly, the rest as 32 bytes each).
    """
    shards = getattr(value, "addressable_shards", None)
    if shards is not None:
        try:
            return max(sum(int(s.data.nbytes) for s in shards), int(value.nbytes))
        except Exception:  # noqa: BLE001 -- a deleted array, a tracer: fall through
            pass
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, (list, tuple)):
        items = value if len(value) <= 16 else ()
        return sys.getsizeof(value) + (sum(size_of(v) for v in items) if items else 32 * len(value))
    return sys.getsizeof(value)


def call_size(x: Any, outcome: Outcome) -> int:
    """What keeping one call costs: its input and its result."""
    return size_of(x) + size_of(outcome.result)


@dataclass
class Pool:
    budget: int = BUDGET
    examples: list[Any] = field(default_factory=list)  # Cases and groups, in the order first seen
    calls: int = 0  # calls made through observe
    recalls: int = 0  # of those, calls of an input whose earlier call was dropped
    kept_bytes: int = 0  # size of the calls kept now, at most ``budget``
    _kept: OrderedDict[tuple[Any, ...], tuple[Any, Outcome, int]] = field(default_factory=OrderedDict)
    _called: set[tuple[Any, ...]] = field(default_factory=set)  # keys called at least once
    _keys: set[Any] = field(default_factory=set)
    holding: bool = False  # True in the shared pass: a call over the budget is held until released
    _held: tuple[tuple[Any, ...], Any, Outcome] | None = None  # that call, at most one

    def __post_init__(self) -> None:
        return_large_blocks()

    def observe(self, case: Case, call: Callable[[Case], tuple[Any, Outcome]]) -> tuple[Any, Outcome, bool]:
        """``(x, outcome, shared)``: the call's, made now or (``shared``) by an earlier check."""
        k = key(case)
        hit = self._kept.get(k)
        if hit is not None:
            self._kept.move_to_end(k)
            return hit[0], hit[1], True
        held = self._held
        if held is not None and held[0] == k:
            return held[1], held[2], True
        self._held = held = None  # dropped before the call: one result over the budget alive at a time
        x, outcome = call(case)
        self.calls += 1
        if k in self._called:
            self.recalls += 1
        self._called.add(k)
        self._keep(k, x, outcome)
        self.remember(case)
        return x, outcome, False

    def forget(self, case: Case) -> None:
        """Drop the kept call of ``case``, if any (the schedule's calls, once every check judged them)."""
        k = key(case)
        dropped = self._kept.pop(k, None)
        if dropped is not None:
            self.kept_bytes -= dropped[2]
        if self._held is not None and self._held[0] == k:
            self._held = None

    def hold(self) -> None:
        """From now on, keep the latest call over the budget too (one at a time), until ``release``."""
        self.holding = True

    def drop_held(self) -> None:
        """Drop the held call, if any (every check has judged it)."""
        self._held = None

    def release(self) -> None:
        """Drop the held call, if any, and hold no more."""
        self.holding, self._held = False, None

    def is_kept(self, case: Case) -> bool:
        """Whether a call of ``case`` is kept now (a check asking for it gets it without a call)."""
        k = key(case)
        return k in self._kept or (self._held is not None and self._held[0] == k)

    def _keep(self, k: tuple[Any, ...], x: Any, outcome: Outcome) -> None:
        size = call_size(x, outcome)
        if size > self.budget:
            # Never kept: the check holding it drops it when done.  Held in the shared pass.
            if self.holding:
                self._held = (k, x, outcome)
            return
        self._kept[k] = (x, outcome, size)
        self.kept_bytes += size
        while self.kept_bytes > self.budget:
            _, (_, _, dropped) = self._kept.popitem(last=False)
            self.kept_bytes -= dropped

    def remember(self, example: Any) -> None:
        """Offer ``example`` (a Case or a group of them) to later checks."""
        k = _example_key(example)
        if k not in self._keys:
            self._keys.add(k)
            self.examples.append(example)

    def withdraw(self, example: Any) -> None:
        """Offer ``example`` to later checks no more (an input past 32 MiB: a few checks judge it,
        once, and the run does not keep it)."""
        k = _example_key(example)
        if k in self._keys:
            self._keys.discard(k)
            self.examples = [e for e in self.examples if _example_key(e) != k]

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
