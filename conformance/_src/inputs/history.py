"""Histories of calls, searched and shrunk by Hypothesis: the implementation's *state*.

A fixed script of calls reaches only the caches it was written for.  Here
Hypothesis's stateful testing (``RuleBasedStateMachine``) writes the scripts:
each step is one call of ``pjit_double``, and the history is searched (its
length, the order of its calls, each call's mesh, dtype, length, values and
placement) and, when a step fails, shrunk to the shortest history that still
fails.  Two rules make the steps:

* ``call``: a call on a mesh from a pool that grows as the history goes on
  (``MESH_MOVES``): a mesh already used; a new one over any subset and order of
  the devices, with a data axis of any size (1, a power of two, odd, even but
  not a power of two); the same mesh rebuilt; the same devices with the axis
  names swapped or in another shape; the same devices in another order; the
  same first and last device with the inside changed; a subset that is not a
  prefix of ``jax.devices()``; the devices with the highest ids (ids of two
  digits where there are ten or more devices).  Any dtype of the contract,
  any placement of ``x``, a length of 1 to 3 times the data axis;
* ``revisit``: an earlier call's (shape, dtype, mesh) again, with new values
  and any placement;
* ``pass_back``: a result the implementation returned (the last one, or an earlier one the
  caller still holds: ``HELD``) passed back as ``x`` (``y = f(y)``, ``f(f(x))``), on its own
  mesh or another one of the history whose data axis divides its length;
* ``raise_between``: a call on an earlier call's mesh and dtype with a length its data axis does
  not divide (it must raise the contract's error), then that earlier (shape, dtype, mesh) again;
* ``time_passes``: minutes pass before the next call, as the implementation's clocks read them
  (clocks.py: they jump ahead during its calls; the kit's own timing stays true).

After every call, every result the caller still holds (the last ``HELD``) must be intact:
neither deleted (donated) nor changed by a later call.

After every step, the invariant ``recall`` calls the least recently used
(shape, dtype, mesh) of the history again (what a bounded cache evicts first:
every recall comes after all the other keys), with new values, where its last
x lived, and then once more as its ``twin``: a NumPy x as an uncommitted one
(or the other way round) and, without a mesh, ``mesh=None`` for an omitted
mesh (or the other way round), which JAX's jit treats alike.  Where the rules
leave it to chance whether a revisit comes after an eviction, of a 16-bit
dtype or of a NumPy x as an uncommitted one, the recall makes it certain for
every key a history reaches, and a failure still ends the history at its step
(Hypothesis shrinks it).  For a correct implementation it compiles nothing.

After every step the kit judges (``judge_step``, from checks.py): the result's
values (an earlier call's result handed back fails here), dtype and layout;
and compiles (``jit_probe.compile_allowed``): a call whose (shape, dtype, mesh) came
earlier in the history compiles nothing of its own, whatever came in between.
JAX's own caches are allowed exactly this, and no more: the programs JAX
compiles to move ``x`` into a layout (``internals.JAX_MOVE_PROGRAMS``) are
not counted, and each jitted function compiles apart for a NumPy or
uncommitted argument and for an argument committed to each sharding, so the
first call that gives one of the implementation's jitted functions (its own
staging jit too) such a kind may compile that function.  Every other compile
of a seen (shape, dtype, mesh) is the implementation's: a cache that evicted
it, keyed on something that changed (the placement, the values, the object's
id), or no cache at all.

Before the search, every run makes the ``planned`` histories, for classes chance reaches too
rarely: one key called ``DEPTH`` times in every placement kind (in a row, and between another
key's calls), and, with 12 or more devices, two meshes whose device ids join alike without a
separator (1, 10 and 11, 0).

A failure prints the history, call by call, and a rerun command whose
``--case`` token (``case.encode_history``) replays exactly those calls
(``replay``).  The verdict record counts what the search reached
(``HistoryReach``): histories, steps, the most distinct meshes and
(mesh, dtype) keys in one history, and revisits of a key after 4 or more
other keys (past what a cache of 4 entries keeps).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from hypothesis import Phase
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from jax.sharding import Mesh

from conformance._src import internals
from conformance._src.declared.history import joined_alike
from conformance._src.declared.terms import DATA_AXIS, Contract, data_axis_size, dtypes_in_domain
from conformance._src.inputs import coverage
from conformance._src.inputs import strategies as cst
from conformance._src.inputs.case import Case, MeshArg
from conformance._src.inputs.schedule import Schedule
from conformance._src.library.show import make_mesh
from conformance._src.library.strategies import OTHER_AXIS, values_from

# How the next call's mesh comes from the pool (``MESH_MOVES``), in the order shrinking prefers.
MESH_MOVES = (
    "again",
    "new",
    "rebuilt",
    "names-swapped",
    "permuted",
    "inside-changed",
    "subset",
    "high-ids",
    "ids-joined-alike",
)
MULTIPLES = (1, 2, 3)  # a call's length: this many times the data axis
STEPS = 20  # calls in one history at most (Hypothesis's stateful_step_count)
SHRINK_STOPPED = (
    "conformance: shrinking the failing history stopped at the kit's budget of {seconds:g} s "
    "(state.histories, set per --hypothesis-profile); the history below is the shortest found by then"
)
EVICTING = 4  # a revisit after this many other keys is past what a cache of 4 entries keeps
HELD = 8  # the caller holds its last this many results: passed back, and judged intact after each call
# How far the implementation's clocks jump ahead when time passes (time_passes), in minutes.
MINUTES = (1, 10, 61, 24 * 60)
# The planned deep history calls each of its keys this many times in every placement kind: half of
# them in a row, half between another key's calls (SPEC, "state.histories").
DEPTH = 12

Key = tuple[Any, ...]


def indivisible(case: Case) -> bool:
    """A call whose length the data axis does not divide: it must raise the contract's error."""
    return case.n % data_axis_size(case.mesh) != 0


def mesh_key(mesh: Mesh | None) -> Key | None:
    """What makes two meshes the same layout: the device ids in order, the shape, the axis names."""
    if mesh is None:
        return None
    return (tuple(int(d.id) for d in mesh.devices.flat), tuple(mesh.devices.shape), tuple(mesh.axis_names))


def call_key(case: Case) -> Key:
    """(shape, dtype, mesh): what a correct implementation compiles once for."""
    return (case.n, str(case.dtype), mesh_key(case.mesh))


def twin(case: Case) -> Case | None:
    """``case`` passed another way that JAX's jit treats alike (``recall``): a NumPy x as an
    uncommitted one or the other way round, and, without a mesh, ``mesh=None`` for an omitted
    mesh or the other way round.  None where there is no such way."""
    placement = case.placement
    if placement[0] in ("numpy", "uncommitted"):
        placement = ("uncommitted",) if placement[0] == "numpy" else ("numpy",)
    mesh_arg: MeshArg = case.mesh_arg
    if case.mesh is None:
        mesh_arg = "none" if case.mesh_arg == "omit" else "omit"
    if placement == case.placement and mesh_arg == case.mesh_arg:
        return None
    return Case(case.values, case.mesh, mesh_arg, placement, case.clocks_ahead)


@dataclass
class HistoryReach:
    """What the search reached, for the coverage table."""

    histories: int = 0
    steps: int = 0
    revisits: int = 0  # calls whose (shape, dtype, mesh) came earlier in their history
    deep_revisits: int = 0  # of those, after EVICTING or more other keys
    most_meshes: int = 0  # distinct meshes in one history
    most_keys: int = 0  # distinct (mesh, dtype) keys in one history
    moves: dict[str, int] = field(default_factory=dict)  # steps per mesh move
    planned_steps: int = 0  # calls of the planned histories (``planned``)
    deepest: int = 0  # the most calls of one key in one planned history
    deepest_in_a_row: int = 0  # the most calls of one key in a row
    joined_alike: int = 0  # planned calls on meshes whose ids join alike (1, 10 / 11, 0)
    passed_back: int = 0  # calls given an earlier result of the implementation as x
    raised_between: int = 0  # calls that raised the contract's error between calls of one key
    time_passed: int = 0  # calls after the implementation's clocks jumped ahead

    def count_planned(self, steps: list[Case]) -> None:
        self.planned_steps += len(steps)
        self.passed_back += sum(case.placement[0] == "result" for case in steps)
        self.raised_between += sum(map(indivisible, steps))
        self.time_passed += sum(
            b.clocks_ahead > a.clocks_ahead for a, b in zip(steps, steps[1:], strict=False)
        )
        keys = [call_key(case) for case in steps]
        self.deepest = max(self.deepest, *(keys.count(key) for key in keys))
        run = 0
        for k, key in enumerate(keys):
            run = run + 1 if k and keys[k - 1] == key else 1
            self.deepest_in_a_row = max(self.deepest_in_a_row, run)
        if len({key[2] for key in keys}) == 2 and all(
            key[2] is not None and len(key[2][0]) == 2 for key in keys
        ):
            self.joined_alike += len(steps)

    def as_dict(self) -> dict[str, int]:
        return {
            "planned calls": self.planned_steps,
            "most calls of one key": self.deepest,
            "most calls of one key in a row": self.deepest_in_a_row,
            "calls on meshes whose ids join alike": self.joined_alike,
            "results passed back": self.passed_back,
            "errors between calls of one key": self.raised_between,
            "calls after time passed": self.time_passed,
            "histories": self.histories,
            "steps": self.steps,
            "revisits": self.revisits,
            "revisits after 4+ other keys": self.deep_revisits,
            "most meshes in one history": self.most_meshes,
            "most (mesh, dtype) keys in one history": self.most_keys,
            **{f"move {k}": v for k, v in sorted(self.moves.items())},
        }


def _ids(mesh: Mesh | None) -> list[int]:
    return [0] if mesh is None else [int(d.id) for d in mesh.devices.flat]


def _shaped(ids: list[int], like: Mesh | None) -> Mesh:
    """``ids`` as a mesh of ``like``'s shape and names (1-D 'data' where ``like`` is None)."""
    if like is None or like.devices.size != len(ids):
        return make_mesh(ids, (len(ids),), (DATA_AXIS,))
    return make_mesh(ids, tuple(like.devices.shape), tuple(like.axis_names))


def _two_axes(ids: list[int], draw: Callable[..., Any]) -> Mesh:
    """``ids`` as a 2-D mesh: any factorisation, 'data' first or second."""
    size = len(ids)
    data = draw(st.sampled_from([a for a in range(1, size + 1) if size % a == 0]))
    if draw(st.booleans()):
        return make_mesh(ids, (data, size // data), (DATA_AXIS, OTHER_AXIS))
    return make_mesh(ids, (size // data, data), (OTHER_AXIS, DATA_AXIS))


def _data_slots(mesh: Mesh | None, size: int) -> list[int]:
    """Each flat position's index along the data axis (which shard of a split vector it holds)."""
    if mesh is None or mesh.devices.size != size or DATA_AXIS not in mesh.axis_names:
        return list(range(size))
    axis = list(mesh.axis_names).index(DATA_AXIS)
    return [int(i) for i in np.unravel_index(np.arange(size), mesh.devices.shape)[axis]]


def _moving_a_shard(order: list[int], ids: list[int], base: Mesh | None) -> list[int]:
    """``order`` (a permutation of ``ids``), changed where needed so that some device holds
    another shard than in ``base``: an order among one shard's replicas (or none at all) places
    a vector's shards as before, so a cache keyed on the device set would go unseen.  Where the
    data axis has one device, every device holds the whole vector: the order still changes
    (JAX's device assignment), never left as it was."""
    slots = _data_slots(base, len(ids))
    was = {device: slots[k] for k, device in enumerate(ids)}
    if any(was[device] != slots[k] for k, device in enumerate(order)):
        return order
    other = next((k for k in range(1, len(order)) if slots[k] != slots[0]), None)
    if other is None:  # one shard: any other order
        other = 1 if list(order) == ids else 0
    order = list(order)
    order[0], order[other] = order[other], order[0]
    return order


def move(how: str, base: Mesh | None, draw: Callable[..., Any]) -> Mesh | None:
    """The mesh that ``how`` (``MESH_MOVES``) makes from ``base``."""
    every = [int(d.id) for d in jax.devices()]
    ids = _ids(base)
    size = len(ids)
    if how == "again":
        return base
    if how == "new":
        return draw(cst.meshes(devices=jax.devices()))
    if how == "rebuilt":  # Mesh objects are interned: a cache keyed on id(mesh) must still find it
        return None if base is None else make_mesh(ids, tuple(base.devices.shape), tuple(base.axis_names))
    if how == "names-swapped":  # the same device ids, the axes renamed or reshaped
        if base is not None and base.devices.ndim == 2:
            return Mesh(base.devices, tuple(reversed(base.axis_names)))
        return _two_axes(ids, draw)
    if how == "permuted":  # the same devices in another order (one device: another device)
        if size == 1:
            return _shaped([draw(st.sampled_from([i for i in every if i != ids[0]] or every))], base)
        return _shaped(_moving_a_shard(draw(st.permutations(ids)), ids, base), base)
    if how == "inside-changed":  # the same first and last device, others between
        others = [i for i in every if i not in ids]
        if size < 3:  # nothing inside: one device put between them (a 1-device mesh stays)
            return (
                _shaped([ids[0], draw(st.sampled_from(others)), ids[-1]], None)
                if size == 2 and others
                else base
            )
        middle = [i for i in every if i not in (ids[0], ids[-1])]
        inside = draw(st.permutations(middle))[: size - 2]
        return _shaped([ids[0], *inside, ids[-1]], base)
    if how == "subset":  # not a prefix of jax.devices()
        k = draw(st.integers(1, max(1, len(every) - 1)))
        chosen = draw(st.permutations(every))[:k]
        if sorted(chosen) == every[:k] and len(every) > k:
            chosen = [*chosen[1:], every[k]]
        return make_mesh(chosen, (k,), (DATA_AXIS,)) if draw(st.booleans()) else _two_axes(chosen, draw)
    if how == "high-ids":  # the highest device ids, in any order
        k = draw(st.integers(1, len(every)))
        chosen = draw(st.permutations(every[-k:]))
        return make_mesh(chosen, (k,), (DATA_AXIS,)) if draw(st.booleans()) else _two_axes(chosen, draw)
    if how == "ids-joined-alike":  # ids that join alike without a separator: 1, 12 and 11, 2
        pair = joined_alike(every, ids)
        return base if pair is None else make_mesh(pair[1], (2,), (DATA_AXIS,))
    raise ValueError(f"unknown mesh move {how!r}")


@dataclass
class _Session:
    """What one run of the search shares between its histories."""

    judge_step: Callable[[list[Case], Case], bool]  # judges one step; False: not judged (refused)
    dtypes: list[np.dtype]
    placements: Sequence[str] | None
    raises: bool  # the contract names an error for lengths the data axis does not divide
    reach: HistoryReach = field(default_factory=HistoryReach)


class _Histories(RuleBasedStateMachine):
    """One history: its calls so far, the meshes they used, the (shape, dtype, mesh) keys seen."""

    session: _Session  # set on the subclass that ``search`` makes

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[Case] = []
        self.meshes: list[Mesh | None] = [None]
        self.order: list[tuple[Any, str]] = []  # (mesh, dtype) keys, in order of first use
        self.lru: dict[Key, Case] = {}  # each (shape, dtype, mesh): its last call, least recent first
        self.clock = 0  # seconds the implementation's clocks read ahead (time_passes)
        self.jumped = False  # the clocks jumped since the last call
        self.session.reach.histories += 1

    def _step(self, case: Case, how: str) -> None:
        reach = self.session.reach
        if not self.session.judge_step(self.steps, case):
            return
        self.steps.append(case)
        reach.steps += 1
        reach.moves[how] = reach.moves.get(how, 0) + 1
        reach.passed_back += case.placement[0] == "result"
        reach.time_passed += self.jumped
        self.jumped = False
        if indivisible(case):  # it raised, as it must: no key of the history
            return
        self.lru.pop(call_key(case), None)
        self.lru[call_key(case)] = case
        if case.mesh not in self.meshes:
            self.meshes.append(case.mesh)
        pair = (mesh_key(case.mesh), str(case.dtype))
        if pair in self.order:
            reach.revisits += 1
            reach.deep_revisits += len(self.order) - 1 - self.order.index(pair) >= EVICTING
            self.order.remove(pair)  # most recently used last
        self.order.append(pair)
        distinct = {key for key, _ in self.order}
        reach.most_meshes = max(reach.most_meshes, len(distinct))
        reach.most_keys = max(reach.most_keys, len(self.order))

    def _case(self, mesh: Mesh | None, dtype: np.dtype, n: int, data: st.DataObject) -> Case:
        # Values from a drawn seed (what the schedule draws: strategies.values_from): new values at
        # every call, cheap to draw; values themselves are the other checks' business.
        seed = data.draw(st.integers(0, 2**32 - 1), label="values seed")
        values = values_from(np.random.default_rng(seed), dtype, n)
        divides = n % data_axis_size(mesh) == 0  # else no target layout to be in
        placement = data.draw(
            cst.placements(length=n, kinds=self.session.placements, target=divides), label="placement"
        )
        mesh_arg: MeshArg = "mesh" if mesh is not None else data.draw(st.sampled_from(["omit", "none"]))
        return Case(values, mesh, mesh_arg, placement, self.clock)

    @rule(how=st.sampled_from(MESH_MOVES), pick=st.integers(0, 255), data=st.data())
    def call(self, how: str, pick: int, data: st.DataObject) -> None:
        base = self.meshes[pick % len(self.meshes)]
        mesh = move(how, base, data.draw)
        dtype = data.draw(st.sampled_from(self.session.dtypes), label="dtype")
        n = data_axis_size(mesh) * data.draw(st.sampled_from(MULTIPLES), label="multiple")
        self._step(self._case(mesh, dtype, n, data), how)

    @precondition(lambda self: any(not indivisible(step) for step in self.steps))
    @rule(pick=st.integers(0, 255), data=st.data())
    def revisit(self, pick: int, data: st.DataObject) -> None:
        called = [step for step in self.steps if not indivisible(step)]  # a call that raised is no key
        earlier = called[pick % len(called)]  # shrinks to the oldest call, which caches evict first
        self._step(self._case(earlier.mesh, earlier.dtype, earlier.n, data), "revisit")

    def _held(self) -> list[int]:
        """The calls whose results the caller still holds (1-based), the last first."""
        first = max(0, len(self.steps) - HELD)
        return [k for k in range(len(self.steps), first, -1) if not indivisible(self.steps[k - 1])]

    @precondition(lambda self: bool(self._held()))
    @rule(back=st.integers(0, HELD - 1), pick=st.integers(0, 255), data=st.data())
    def pass_back(self, back: int, pick: int, data: st.DataObject) -> None:
        """A result the caller holds, passed back as x: the last one first (shrinking prefers it),
        on its own call's mesh first, else another mesh of the history that divides its length."""
        held = self._held()
        k = held[back % len(held)]
        given = self.steps[k - 1]
        meshes = [given.mesh]
        if jax.process_count() == 1:  # across processes JAX moves no array between other device sets
            meshes += [m for m in self.meshes if m is not given.mesh and given.n % data_axis_size(m) == 0]
        mesh = meshes[pick % len(meshes)]
        mesh_arg: MeshArg = "mesh" if mesh is not None else data.draw(st.sampled_from(["omit", "none"]))
        # The values are the result's, which the judge reads from the result itself.
        self._step(Case(given.values, mesh, mesh_arg, ("result", k), self.clock), "pass-back")

    def _divisible_meshes(self) -> list[Case]:
        return [step for step in self.steps if data_axis_size(step.mesh) > 1 and not indivisible(step)]

    @precondition(lambda self: self.session.raises and bool(self._divisible_meshes()))
    @rule(pick=st.integers(0, 255), extra=st.integers(1, 255), data=st.data())
    def raise_between(self, pick: int, extra: int, data: st.DataObject) -> None:
        """An error between two calls of one key: an earlier call's mesh and dtype with a length
        its data axis does not divide, then that call's (shape, dtype, mesh) again."""
        earlier = self._divisible_meshes()[pick % len(self._divisible_meshes())]
        size = data_axis_size(earlier.mesh)
        n = earlier.n + 1 + (extra - 1) % (size - 1)
        self._step(self._case(earlier.mesh, earlier.dtype, n, data), "raise-between")
        if self.steps and indivisible(self.steps[-1]):
            self.session.reach.raised_between += 1
        self._step(self._case(earlier.mesh, earlier.dtype, earlier.n, data), "after-raise")

    # Across processes the clocks stay true: JAX's own multi-process calls read them (a jump there
    # hung a correct implementation's call in a 2-process run).
    # After a call only: a history of nothing but time passing would judge nothing (a blind
    # judge's run searched 5 histories of 0 calls).
    @precondition(lambda self: jax.process_count() == 1 and bool(self.steps))
    @rule(minutes=st.sampled_from(MINUTES))
    def time_passes(self, minutes: int) -> None:
        """Minutes pass before the next call, as the implementation's clocks read them."""
        self.clock += 60 * minutes
        self.jumped = True

    @invariant()
    def recall(self) -> None:
        """The least recently used key again, where its last x lived, then its ``twin``; new
        values, seeded by the history's length (a replay recalls the same values)."""
        if not self.steps:
            return
        last = next(iter(self.lru.values()))
        rng = np.random.default_rng(len(self.steps))
        for again in (last, twin(last)):
            if again is not None:
                values = values_from(rng, again.dtype, again.n)
                placement = again.placement
                if placement[0] == "result" and placement[1] not in self._held():
                    placement = ("target",)  # the caller dropped that result: one in the same layout
                self._step(Case(values, again.mesh, again.mesh_arg, placement, self.clock), "recall")


def search(
    judge_step: Callable[[list[Case], Case], bool],
    reach: HistoryReach,
    *,
    contract: Contract,
    options: dict[str, Any],
    x64: bool = False,
    placements: Sequence[str] | None = None,
    shrink_seconds: float = 30.0,
) -> None:
    """Search histories with Hypothesis (``options``: its settings), counting what was reached in ``reach``;
    a failing history is shrunk for ``shrink_seconds`` at most (explore.SHRINK_SECONDS, per profile).

    ``judge_step(history, case)`` calls the implementation once and judges
    the call, ``history`` being the calls before it; it raises on a failure
    (Hypothesis then shrinks the history) and returns False for a call that
    was refused as the contract allows (not part of the history).
    """
    from hypothesis import settings

    raises = contract.raises is not None and contract.takes_mesh
    session = _Session(judge_step, dtypes_in_domain(contract, x64=x64), placements, raises, reach)
    machine = type("Histories", (_Histories,), {"session": session})
    # No explain phase: it re-runs the shrunk history with every step varied (compiles, each).
    loaded = settings.default  # the profile's phases where the kit sets none (no shrinking in mutant runs)
    given = options.get("phases", loaded.phases if loaded is not None else list(Phase))
    phases = [p for p in given if p is not Phase.explain]
    options = {**options, "stateful_step_count": STEPS, "phases": phases}
    stopped = SHRINK_STOPPED.format(seconds=shrink_seconds)
    with internals.shrink_budget(shrink_seconds, stopped):  # each try replays a history: compiles, not µs
        run_state_machine_as_test(machine, settings=settings(**options))


def _deep_key_mesh(every: list[int]) -> Mesh:
    """The second deep key's mesh: 2-D, 'data' second and of 2 devices, where 4 devices exist."""
    if len(every) >= 4:
        return make_mesh(every[:4], (2, 2), (OTHER_AXIS, DATA_AXIS))
    return make_mesh(every, (len(every),), (DATA_AXIS,))


def planned(
    *, contract: Contract, x64: bool = False, placements: Sequence[str] | None = None, seed: int = 0
) -> list[list[Case]]:
    """The histories every run makes before the search, for classes chance reaches too rarely:

    * depth: two keys, each called ``DEPTH`` times in every placement kind (the kinds in turn,
      a round each), the first key's first half of rounds in a row, then the two keys' rounds
      between each other's: a path that changes after a key's K-th call (in a row, or in one
      placement) meets every K up to ``DEPTH``;
    * ids of one and two digits (12 or more devices): two meshes whose ids join alike without a
      separator (1, 10 and 11, 0), called in turn;
    * names swapped (2 or more devices): one device array as a 2-D mesh, ('data', other) and
      ('other', 'data'), called in turn: a cache keyed on the devices alone (their shape, ids or
      order) gives one of them the other's layout;
    * the other moves, each in a short history (2 or more devices, a contract with a mesh):
      ``_moves``.
    """
    rng = random.Random(f"planned/{seed}")
    dtypes = dtypes_in_domain(contract, x64=x64)
    every = [int(d.id) for d in jax.devices()]
    kinds = list(placements or coverage.PLACEMENTS)

    def rounds(mesh: Mesh | None, dtype: np.dtype, n: int, mesh_arg: MeshArg) -> list[list[Case]]:
        made = []
        for r in range(DEPTH):
            made.append(
                [
                    Case(
                        values_from(np.random.default_rng(rng.getrandbits(32)), dtype, n),
                        mesh,
                        mesh_arg,
                        Schedule.placement(kind, n, mesh, rng),
                    )
                    for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]  # each kind first in turn
                ]
            )
        return made

    float32 = np.dtype("float32") if np.dtype("float32") in dtypes else dtypes[0]
    first = rounds(None, float32, 3, "omit")
    other_mesh = _deep_key_mesh(every)
    second = rounds(other_mesh, dtypes[-1], 2 * data_axis_size(other_mesh), "mesh")
    half = DEPTH // 2
    steps = [case for one in first[:half] for case in one]
    for a, b in zip(first[half:], second[:half], strict=True):
        steps += [*a, *b]
    steps += [case for one in second[half:] for case in one]
    found = [steps]
    pair = joined_alike(every)
    if pair is not None:
        meshes = [make_mesh(ids, (2,), (DATA_AXIS,)) for ids in pair]
        turns = []
        for r in range(2):
            for k, mesh in enumerate(meshes):
                kind = kinds[(2 * r + k) % len(kinds)]
                values = values_from(np.random.default_rng(rng.getrandbits(32)), float32, 4)
                turns.append(Case(values, mesh, "mesh", Schedule.placement(kind, 4, mesh, rng)))
        found.append(turns)
    if len(every) >= 2:
        found.append(_names_swapped(every, float32, kinds, rng))
    if len(every) >= 2 and contract.takes_mesh:
        found += _moves(every, float32, contract.raises is not None, rng)
    return found


def first_calls(*, contract: Contract, seed: int = 0) -> list[list[Case]]:
    """The histories ``state.first-call`` replays, each in a fresh process whose first call is
    the history's first (2 or more devices, a contract with a mesh):

    * under ``jax.default_device(the last device)``, ``f(x)`` (its result still on the first
      device), then plain calls without a mesh, and one on a mesh away from the first device;
    * where JAX has a mesh context, under ``jax.set_mesh(mesh)``, ``f(x, mesh=mesh)`` over devices
      away from the first (JAX refuses a jit over other devices than the context's), then plain
      calls without a mesh and on that mesh.
    """
    from conformance._src.calling.context import set_mesh_available

    every = [int(d.id) for d in jax.devices()]
    if len(every) < 2 or not contract.takes_mesh:
        return []
    rng = random.Random(f"first/{seed}")
    dtypes = dtypes_in_domain(contract)
    dtype = np.dtype("float32") if np.dtype("float32") in dtypes else dtypes[0]
    away = make_mesh(every[-2:], (2,), (DATA_AXIS,))

    def fresh() -> np.ndarray:
        return values_from(np.random.default_rng(rng.getrandbits(32)), dtype, 4)

    plain = [
        Case(fresh(), None, "omit"),
        Case(fresh(), None, "none", ("numpy",)),
        Case(fresh(), away, "mesh"),
    ]
    found = [[Case(fresh(), None, "omit", under=("default_device", every[-1])), *plain]]
    if set_mesh_available():
        found.append([Case(fresh(), away, "mesh", under=("set_mesh",)), *plain])
    return found


def _moves(every: list[int], dtype: np.dtype, raises: bool, rng: random.Random) -> list[list[Case]]:
    """The moves besides calls, each in a short history of its own (what fails prints as is):
    a result passed back on its own mesh (y = f(y)) and then onto the default mesh (f(f(x)));
    a call that raises (a length the data axis does not divide; where the contract names the
    error) between two calls of one key; the clocks 10 minutes ahead between two calls of one
    key, then of another."""
    mesh = make_mesh(every[:2], (2,), (DATA_AXIS,))

    def fresh(n: int) -> np.ndarray:
        return values_from(np.random.default_rng(rng.getrandbits(32)), dtype, n)

    first = Case(fresh(4), mesh, "mesh")
    found = [
        [  # the values of a result passed back are the result's (the judge reads them)
            first,
            Case(first.values, mesh, "mesh", ("result", 1)),
            # onto the default mesh (across processes JAX moves no array between device sets)
            *([Case(first.values, None, "omit", ("result", 2))] if jax.process_count() == 1 else []),
        ]
    ]
    if raises:
        found.append(
            [Case(fresh(4), mesh, "mesh"), Case(fresh(5), mesh, "mesh"), Case(fresh(4), mesh, "mesh")]
        )
    if jax.process_count() > 1:
        return found  # across processes the clocks stay true (_Histories.time_passes)
    found.append(
        [
            Case(fresh(4), mesh, "mesh"),
            Case(fresh(4), mesh, "mesh", clocks_ahead=600),
            Case(fresh(4), None, "omit"),
            Case(fresh(4), None, "omit", clocks_ahead=1200),
        ]
    )
    return found


def _names_swapped(every: list[int], dtype: np.dtype, kinds: list[str], rng: random.Random) -> list[Case]:
    """Four calls over one device array, 2 x (up to 4) devices, its axes named ('data', other)
    then (other, 'data'), in turn; each length splits evenly over both 'data' axes."""
    rows = min(len(every), 8) // 2
    devices = jax.devices()[: 2 * rows]
    first = Mesh(np.array(devices).reshape(2, rows), (DATA_AXIS, OTHER_AXIS))
    swapped = Mesh(first.devices, (OTHER_AXIS, DATA_AXIS))
    n = 2 * int(np.lcm(2, rows))
    turns = []
    for k, mesh in enumerate([first, swapped, first, swapped]):
        values = values_from(np.random.default_rng(rng.getrandbits(32)), dtype, n)
        turns.append(Case(values, mesh, "mesh", Schedule.placement(kinds[k % len(kinds)], n, mesh, rng)))
    return turns


def replay(judge_step: Callable[[list[Case], Case], bool], steps: list[Case]) -> None:
    """Run exactly ``steps`` (a decoded ``--case`` history token), judging each."""
    history: list[Case] = []
    for case in steps:
        if judge_step(history, case):
            history.append(case)
