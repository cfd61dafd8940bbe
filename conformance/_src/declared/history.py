"""Histories of calls of a declared contract: the function's *state*, searched, shrunk, replayed.

A history is a list of ``Step``s, each one call of the function (a ``draw.Call``) and what came
before it: a result of the function passed back as the first argument (``back``), a call that
must raise the contract's error (``raises``), the function's clocks moved ahead (``clocks``).
``Judge`` (in running/declared_checks.py) calls them in order and judges each.

Histories come three ways, all of them for every contract, over its own arguments and axes:

* ``planned``: every run, by construction, the histories chance reaches too rarely.
  ``stale``: one form over a mesh A, then the same devices in another order, the same device ids
  in another shape, A's shape and axis names over other devices, then A and the second again
  (a cache keyed on the device set, the flat device ids, the mesh's shape or its axis names hands
  a result laid out for another mesh; one that keeps the last key, or the two latest meshes,
  compiles again).  ``depth``: one key called ``DEPTH`` times, every placement kind of the first
  argument in turn, between another key's calls for the second half.  ``wide``: ``WIDE`` keys,
  then the first three again (a cache bounded to fewer keys evicted them).  ``names``: one device
  array under its axis names and under them reversed (a cache keyed on the device array alone
  hands the second the first's layout).  ``moves``: a result passed
  back, a call that raises between two calls of one key, and the clocks ahead between two calls
  of one key, where the contract has them.
* ``first_calls``: histories whose first call must be the process's first, under a context
  (``jax.default_device``, ``jax.set_mesh``), then plain calls over other devices: each runs in a
  fresh process of its own (running/fresh.py), since the run's process called the function long
  before.
* ``steps``: a search (Hypothesis draws each move in turn, from ``st.data()``; a failure is
  shrunk to the shortest history that still fails).  Its moves: a call on a mesh the pool gives
  (``MOVES``: one used before; a new one; rebuilt; its devices in another order; the same ids in
  another shape; its axis names swapped; a subset of the devices; other devices), of a form used
  before on it or a new one; a revisit of an earlier key; a held result passed back; an error
  between two calls of one key; time passing.  After every step the least recently used key of
  the history is called again (``recall``): what a bounded cache evicts first.
* ``decode``: a ``--case`` token (``encode``), replayed exactly.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import jax
import numpy as np
from hypothesis import strategies as st
from jax.sharding import Mesh, PartitionSpec

from conformance._src.calling import context
from conformance._src.declared.contract import MESH_KEYWORD, MESH_NONE, NUMPY, Contract, tied_shape
from conformance._src.declared.draw import (
    GIVEN_KINDS,
    GIVEN_MESH,
    GIVEN_NONE,
    GIVEN_NOTHING,
    LAYOUTS,
    NUMPY_FORMS,
    Call,
    Form,
    Placed,
    _host,
    _multiples,
    _within,
    calls_of,
    default_mesh,
    fits,
    forms,
    givens,
    mesh_strategy,
    split,
    within_sides,
)
from conformance._src.library.show import make_mesh

# How a call's mesh comes from the history's meshes, in the order shrinking prefers.
MOVES = (
    "again",
    "new",
    "rebuilt",
    "permuted",
    "reshaped",
    "names-swapped",
    "subset",
    "other-devices",
)
STEPS = 12  # moves in one searched history at most (each may bring a recall)
HELD = 8  # the caller holds its last this many results: passed back, and judged intact after each call
MINUTES = (1, 10, 61, 24 * 60)  # how far the clocks jump when time passes
DEPTH = 12  # the planned deep history calls one key this many times
WIDE = 8  # the planned wide history calls this many keys before it comes back to the first
TOKEN_VERSION = 1


class TokenError(ValueError):
    """A ``--case`` token that is not a history of this contract (the message says why)."""


@dataclass(frozen=True)
class Step:
    """One call of a history and what came before it.

    ``back``: (k, leaf), the k-th call's result (1-based), its leaf-th leaf, passed back as the
    first argument (its values are what the caller holds: the judge reads them); ``rewritten``: k,
    the k-th call's writeable NumPy arguments, the very arrays, given again with this call's
    values written into them (a caller that reuses its host buffers); ``raises``: the
    first argument's sides do not divide, the contract's error must come; ``clocks``: seconds the
    function's clocks read ahead during the call (calling/clocks.py).
    """

    call: Call
    back: tuple[int, int] | None = None
    rewritten: int | None = None
    raises: bool = False
    clocks: int = 0
    under: tuple[Any, ...] = ()  # the context the call is made in (calling/context.py): () none

    def describe(self) -> str:
        text = self.call.describe()
        notes = []
        if self.back is not None:
            k, leaf = self.back
            name = self.call.contract.first.name
            notes.append(f"{name} is the result of call {k} (leaf {leaf}), passed back")
        if self.rewritten is not None:
            notes.append(f"its NumPy arguments are call {self.rewritten}'s arrays, rewritten in place")
        if self.raises:
            error = self.call.contract.raises
            notes.append(f"must raise {error.__name__ if error else 'an error'}")
        if self.clocks:
            notes.append(f"the clocks read {self.clocks // 60} min ahead")
        if self.under:
            notes.append(f"the process's first call, under {self.context()}")
        return text + "".join(f" [{note}]" for note in notes)

    def context(self) -> str:
        """The context the call is made in, as code ("" for none)."""
        if not self.under:
            return ""
        if self.under[0] == "default_device":
            return f"jax.default_device(device {self.under[1]})"
        return "jax.set_mesh(its mesh)"


# ---------------------------------------------------------------------------
# Meshes


def _ids(mesh: Mesh) -> list[int]:
    return [int(d.id) for d in mesh.devices.flat]


def extra_axis(contract: Contract) -> str:
    """A mesh axis name the contract does not use (it replicates)."""
    return next(n for n in ("extra", "extra2", "extra3") if n not in contract.mesh_axes)


def _factorisations(size: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(size,)]
    return [
        (a, *rest)
        for a in range(1, size + 1)
        if size % a == 0
        for rest in _factorisations(size // a, parts - 1)
    ]


def arrangements(contract: Contract, size: int) -> list[tuple[tuple[int, ...], tuple[str, ...]]]:
    """Every (shape, axis names) of ``size`` devices with the contract's axes (in any order), and
    with one more axis that replicates."""
    axes = tuple(contract.mesh_axes)
    found = []
    for names in (axes, (*axes, extra_axis(contract))):
        for order in _orders(names):
            found += [(shape, order) for shape in _factorisations(size, len(order))]
    return found


def _orders(names: tuple[str, ...]) -> list[tuple[str, ...]]:
    if len(names) <= 1:
        return [names]
    return [(n, *rest) for k, n in enumerate(names) for rest in _orders(names[:k] + names[k + 1 :])]


def _arranged(contract: Contract, ids: list[int], draw: Callable[..., Any], unlike: Mesh | None) -> Mesh:
    """``ids`` as a mesh of any arrangement (``arrangements``), another than ``unlike``'s where one is."""
    options = arrangements(contract, len(ids))
    if unlike is not None:
        other = [(s, n) for s, n in options if (s, n) != (tuple(unlike.devices.shape), unlike.axis_names)]
        options = other or options
    shape, names = draw(st.sampled_from(options))
    return make_mesh(ids, shape, names)


def _shard_moved(order: list[int], base: Mesh) -> list[int]:
    """``order`` (a permutation of ``base``'s ids), rotated by one where the draw gave ``base``'s own
    order: the devices are the same, their order is not."""
    ids = _ids(base)
    return ids[1:] + ids[:1] if order == ids else order


def move(contract: Contract, how: str, base: Mesh, draw: Callable[..., Any]) -> Mesh:
    """The mesh that ``how`` (``MOVES``) makes from ``base``; across processes every mesh keeps
    every device (each process takes part in every call)."""
    every = [int(d.id) for d in jax.devices()]
    ids, size = _ids(base), base.devices.size
    alone = jax.process_count() == 1
    if how == "again":
        return base
    if how == "new":
        return draw(mesh_strategy(contract))
    if how == "rebuilt":  # Mesh objects are interned: a cache keyed on id(mesh) must still find it
        return make_mesh(ids, tuple(base.devices.shape), tuple(base.axis_names))
    if how == "permuted" or (how in ("subset", "other-devices") and not alone):
        if size == 1:
            others = [i for i in every if i != ids[0]] if alone else []
            if not others:
                return base
            return make_mesh([draw(st.sampled_from(others))], tuple(base.devices.shape), base.axis_names)
        order = _shard_moved([int(i) for i in draw(st.permutations(ids))], base)
        return make_mesh(order, tuple(base.devices.shape), tuple(base.axis_names))
    if how == "reshaped":  # the same ids in the same flat order, another shape or other axes
        return _arranged(contract, ids, draw, base)
    if how == "names-swapped":  # the same device array, its axis names in another order
        if base.devices.ndim >= 2:
            return Mesh(base.devices, tuple(reversed(base.axis_names)))
        return _arranged(contract, ids, draw, base)
    if how == "subset":  # some of the devices, not a prefix of jax.devices()
        k = draw(st.integers(1, max(1, len(every) - 1)))
        chosen = [int(i) for i in draw(st.permutations(every))][:k]
        if sorted(chosen) == every[:k] and len(every) > k:
            chosen = [*chosen[1:], every[k]]
        return _arranged(contract, chosen, draw, None)
    if how == "other-devices":  # base's shape and names over devices it does not use
        others = [i for i in every if i not in ids]
        if len(others) < size:
            others = [i for i in every if i not in ids[:1]]
        if len(others) < size:
            return move(contract, "permuted", base, draw)
        chosen = [int(i) for i in draw(st.permutations(others))][:size]
        return make_mesh(chosen, tuple(base.devices.shape), tuple(base.axis_names))
    raise ValueError(f"unknown mesh move {how!r}")


def can_raise(contract: Contract, mesh: Mesh) -> bool:
    """Can a call on ``mesh`` be given a first argument whose sides its first layout does not
    divide (as NumPy, with mesh=), and must it raise?"""
    if contract.raises is None or contract.mesh != MESH_KEYWORD or NUMPY not in contract.first.placements:
        return False
    return any(p > 1 for p in split(contract.first.layouts[0], mesh, contract.first.rank or 1))


# ---------------------------------------------------------------------------
# The judge's side: what a history needs of whoever calls the function


class Caller(Protocol):
    """What the moves need of the judge: the keys called so far and the results still held."""

    def keys(self) -> list[tuple[Any, Step]]:
        """Each key of the history with its last step, least recently used first."""
        ...

    def rewritable(self) -> list[tuple[int, Step]]:
        """The calls whose writeable NumPy arguments the caller still holds: (k, step)."""
        ...

    def passable(self) -> list[tuple[int, int, Step]]:
        """(k, leaf, step): held results that can be passed back as the first argument of
        ``step``'s form, on its mesh."""
        ...

    def run(self, step: Step) -> None:
        """Call and judge ``step`` (raises the check's failure)."""
        ...


def _again(draw: Callable[..., Any], contract: Contract, call: Call) -> Call:
    """``call`` (its mesh, shapes, dtypes, placements: its key) with new values; ``draw``: a
    composite's draw, or a ``DataObject``'s."""
    hosts = tuple(
        draw(_host(arg, host.dtype.name, host.shape))
        for arg, host in zip(contract.arguments, call.hosts, strict=True)
    )
    return replace(call, hosts=hosts)


def _passed_back(contract: Contract, k: int, leaf: int, step: Step, data: st.DataObject) -> Step:
    """The first argument: the k-th result's leaf (laid out as the contract's out spec says, on
    its own mesh); the others with new values, as in ``step``."""
    call = _again(data.draw, contract, step.call)
    spec = out_specs(contract)[leaf]
    placements = (Placed(LAYOUTS, spec), *call.placements[1:])
    return Step(replace(call, placements=placements), back=(k, leaf))


def out_specs(contract: Contract) -> list[PartitionSpec]:
    return list(jax.tree_util.tree_leaves(contract.out, is_leaf=lambda v: isinstance(v, PartitionSpec)))


def steps(contract: Contract, caller: Caller, data: st.DataObject) -> None:
    """One searched history: each move drawn in turn and run at once (``caller.run``), each
    followed by a recall of the least recently used key."""
    meshes: list[Mesh] = []
    used: list[Form] = []
    clocks = 0
    count = data.draw(st.integers(1, STEPS), label="moves")
    for _ in range(count):
        keys = caller.keys()
        choices = ["call"]
        if keys:
            choices.append("revisit")
        if caller.passable():
            choices.append("pass-back")
        if caller.rewritable():
            choices.append("rewrite")
        raising = [step for _, step in keys if can_raise(contract, step.call.mesh)]
        if raising:
            choices.append("raise-between")
        if keys and jax.process_count() == 1:  # across processes JAX's own calls read the clocks
            choices.append("time-passes")
        choice = data.draw(st.sampled_from(choices), label="move")
        if choice == "call":
            how = data.draw(st.sampled_from(MOVES), label="mesh move") if meshes else "new"
            base = data.draw(st.sampled_from(meshes), label="from mesh") if meshes else None
            mesh = (
                data.draw(mesh_strategy(contract)) if base is None else move(contract, how, base, data.draw)
            )
            if mesh not in meshes:
                meshes.append(mesh)
            fitting = [f for f in used if fits(contract, f, mesh)]
            before: bool = bool(fitting) and data.draw(st.booleans(), label="a form used before")
            if before:
                form = data.draw(st.sampled_from(fitting), label="form")
            else:
                form = data.draw(forms(contract, [mesh]), label="form")
                used.append(form)
            # Where the mesh is optional: mesh=None, or none, between the others.
            given = data.draw(st.sampled_from(givens(contract)), label="mesh given")
            call = data.draw(calls_of(contract, mesh, form, given=given), label="call")
            caller.run(Step(call, clocks=clocks))
        elif choice == "revisit":
            _, earlier = data.draw(st.sampled_from(keys), label="key")
            caller.run(Step(_again(data.draw, contract, earlier.call), clocks=clocks))
        elif choice == "pass-back":
            k, leaf, step = data.draw(st.sampled_from(caller.passable()), label="held result")
            caller.run(replace(_passed_back(contract, k, leaf, step, data), clocks=clocks))
        elif choice == "rewrite":  # the caller's own host buffers, new values written in, again
            k, step = data.draw(st.sampled_from(caller.rewritable()), label="call whose arrays")
            caller.run(Step(_again(data.draw, contract, step.call), rewritten=k, clocks=clocks))
        elif choice == "raise-between":
            earlier = data.draw(st.sampled_from(raising), label="key")
            mesh = earlier.call.mesh
            form = data.draw(forms(contract, [mesh], indivisible=True), label="indivisible form")
            bad = data.draw(calls_of(contract, mesh, form, indivisible=True), label="call")
            caller.run(Step(bad, raises=True, clocks=clocks))
            caller.run(Step(_again(data.draw, contract, earlier.call), clocks=clocks))
        else:
            clocks += 60 * data.draw(st.sampled_from(MINUTES), label="minutes")
        keys = caller.keys()
        if len(keys) > 1:  # the least recently used key again: a bounded cache evicted it first
            caller.run(Step(_again(data.draw, contract, keys[0][1].call), clocks=clocks))


# ---------------------------------------------------------------------------
# Planned histories


def _base_ids(every: list[int]) -> list[int]:
    """The planned stale history's first mesh: half the devices (the rest are its 'other
    devices'), all of them across processes."""
    if jax.process_count() > 1 or len(every) < 4:
        return every
    return every[: len(every) // 2]


@st.composite
def stale(draw: st.DrawFn, contract: Contract) -> list[Step]:
    """One form over A, then A's devices in another order, A's ids in another shape, A's shape
    and names over other devices (one process, 4 or more devices), then A and the second again."""
    every = [int(d.id) for d in jax.devices()]
    ids = _base_ids(every)
    fitting = [
        make_mesh(ids, s, n)
        for s, n in arrangements(contract, len(ids))
        if n == tuple(contract.mesh_axes) and within_sides(contract, make_mesh(ids, s, n))
    ]
    if not fitting:  # max_side is shorter than any split of these devices: no stale history here
        return []
    a = max(fitting, key=lambda m: m.devices.shape[0])  # the first axis of the contract as long as it goes
    meshes = [a, move(contract, "permuted", a, draw), _arranged(contract, ids, draw, a)]
    if len(ids) < len(every):
        rest = [i for i in every if i not in ids]
        meshes.append(make_mesh(rest[: len(ids)], tuple(a.devices.shape), tuple(a.axis_names)))
    form = draw(forms(contract, meshes))
    meshes = [mesh for mesh in meshes if fits(contract, form, mesh)]  # within max_side
    made = [draw(calls_of(contract, mesh, form)) for mesh in meshes]
    made += [draw(calls_of(contract, mesh, form)) for mesh in meshes[:2]]
    # Where a mesh splits a side into fewer parts than A, shapes that it divides and A does not: a
    # stale mesh's function is then given a shape its own layouts do not divide (a replicated
    # result shows no stale layout).
    for mesh in meshes[1:]:
        narrow = _only_on(contract, form, mesh, a)
        if narrow is not None:
            made.append(draw(calls_of(contract, mesh, narrow)))
    return [Step(call) for call in made]


def _only_on(contract: Contract, form: Form, mesh: Mesh, not_on: Mesh) -> Form | None:
    """``form`` with the first argument's sides made ones that ``mesh`` divides and ``not_on``
    does not, where there are such (within the contract's sides); None where there are none."""
    rank = len(form.shapes[0])
    want = _multiples(contract, contract.first, [mesh], rank)
    old = _multiples(contract, contract.first, [not_on], rank)
    sides = list(form.shapes[0])
    for d, (m, o) in enumerate(zip(want, old, strict=True)):
        fitting = [
            k * m
            for k in range(max(1, -(-contract.min_side // m)), contract.max_side // m + 1)
            if (k * m) % o
        ]
        if fitting:
            sides[d] = fitting[0]
    first = tuple(sides)
    shapes = (
        [first]
        + [  # a side the shape leaves free (None) keeps the one drawn
            tuple(s if t is None else t for s, t in zip(shape, tied_shape(arg, first), strict=True))
            if arg.shape is not None
            else shape
            for arg, shape in zip(contract.arguments[1:], form.shapes[1:], strict=True)
        ]
    )
    narrow = Form(tuple(shapes), form.dtypes)
    return narrow if fits(contract, narrow, mesh) and not fits(contract, narrow, not_on) else None


def joined_alike(every: list[int], ids: list[int] | None = None) -> tuple[list[int], list[int]] | None:
    """Two meshes' device ids, two each, that join into one string without a separator (1, 10
    and 11, 0 both give "110"): the first is ``ids`` where it has such a twin.  Such pairs need
    ids of one and of two digits (12 or more devices); None where there is none."""
    known = set(every)

    def twin(pair: list[int]) -> list[int] | None:
        text = "".join(map(str, pair))
        for cut in range(1, len(text)):
            left, right = text[:cut], text[cut:]
            if any(len(part) > 1 and part[0] == "0" for part in (left, right)):
                continue
            other = [int(left), int(right)]
            if other != pair and other[0] != other[1] and set(other) <= known:
                return other
        return None

    if ids is not None and len(ids) == 2 and (found := twin(ids)) is not None:
        return ids, found
    for a in sorted(known):
        for b in sorted(known - {a}):
            if (found := twin([a, b])) is not None:
                return [a, b], found
    return None


@st.composite
def joined(draw: st.DrawFn, contract: Contract) -> list[Step]:
    """Two meshes of two devices whose ids join into one string without a separator (1, 12 and
    11, 2: "112"), one form over each, twice: a cache keyed on such a string hands the second
    mesh the first's (12 or more devices; none where there are fewer)."""
    pair = joined_alike([int(d.id) for d in jax.devices()]) if jax.process_count() == 1 else None
    shapes = [s for s, n in arrangements(contract, 2) if n == tuple(contract.mesh_axes)]
    if pair is None or not shapes:
        return []
    meshes = [make_mesh(ids, shapes[0], tuple(contract.mesh_axes)) for ids in pair]
    form = draw(forms(contract, meshes))
    return [Step(draw(calls_of(contract, mesh, form))) for _ in range(2) for mesh in meshes]


@st.composite
def depth(draw: st.DrawFn, contract: Contract) -> list[Step]:
    """One key ``DEPTH`` times, the first argument's placement kinds in turn (half in a row, half
    between another key's calls)."""
    a = draw(mesh_strategy(contract, "contract-axes"))
    b = draw(mesh_strategy(contract, "contract-axes"))
    form = draw(forms(contract, [a]))
    other = draw(forms(contract, [b]))
    kinds = list(contract.first.placements)
    made: list[Call] = []
    for k in range(DEPTH):
        made.append(draw(calls_of(contract, a, form, placement=kinds[k % len(kinds)])))
        if k >= DEPTH // 2:
            made.append(draw(calls_of(contract, b, other)))
    return [Step(call) for call in made]


def _distinct_meshes(contract: Contract, draw: Callable[..., Any]) -> list[Mesh]:
    """``WIDE`` meshes that differ from each other: each device alone, in a drawn order; across
    processes (every mesh keeps every device), every device in drawn orders."""
    every = [int(d.id) for d in jax.devices()]
    axes = tuple(contract.mesh_axes)
    if jax.process_count() == 1:
        order = [int(i) for i in draw(st.permutations(every))]
        return [make_mesh([i], (1,) * len(axes), axes) for i in order[:WIDE]]
    shape, names = draw(st.sampled_from([o for o in arrangements(contract, len(every)) if o[1] == axes]))
    return [make_mesh([int(i) for i in draw(st.permutations(every))], shape, names) for _ in range(WIDE)]


@st.composite
def wide(draw: st.DrawFn, contract: Contract) -> list[Step]:
    """``WIDE`` keys (each on a mesh of its own), each called once, then the first
    three again, oldest first: a cache bounded to fewer keys (``functools.lru_cache(maxsize=5)``,
    a dict trimmed to its latest entries) evicted them, and compiles again."""
    if contract.mesh == MESH_NONE:  # no mesh handed over: keys of other forms on the first device
        alone = default_mesh(contract)
        found = [draw(calls_of(contract, alone, draw(forms(contract, [alone])))) for _ in range(3 * WIDE)]
        made: list[Call] = []
        for call in found:  # the first call of each key
            if all(call.key() != other.key() for other in made):
                made.append(call)
        made = made[:WIDE]
    else:
        drawn = [draw(mesh_strategy(contract)) for _ in range(WIDE // 2)]
        meshes = list(dict.fromkeys([*drawn, *_distinct_meshes(contract, draw)]))[:WIDE]
        made = [draw(calls_of(contract, mesh, draw(forms(contract, [mesh])))) for mesh in meshes]
    if len(made) < 4:  # too few keys for a revisit to come after others pushed it out
        return []
    made += [_again(draw, contract, call) for call in made[:3]]
    return [Step(call) for call in made]


def swapped_names(contract: Contract, ids: list[int]) -> list[Mesh]:
    """Meshes of ``ids`` with two or more axes of 2 or more devices, whose axis names reversed
    lay the contract's arguments out otherwise (its layouts name one of them)."""
    used = {
        name
        for arg in contract.arguments
        for spec in arg.layouts
        for entry in tuple(spec)
        for name in (entry if isinstance(entry, tuple) else (entry,))
        if name is not None
    }
    found = []
    for shape, names in arrangements(contract, len(ids)):
        wide_axes = [n for n, k in zip(names, shape, strict=True) if k > 1]
        if len(wide_axes) < 2 or not used & set(wide_axes):
            continue
        mesh = make_mesh(ids, shape, names)
        if len(_within(contract, [mesh, Mesh(mesh.devices, names[::-1])])) == 2:  # one form fits both
            found.append(mesh)
    return found


@st.composite
def names_swapped(draw: st.DrawFn, contract: Contract) -> list[Step]:
    """One device array under its axis names (A) and under them reversed (B), one form over
    each, A B A B: a cache keyed on the device array, its shape and flat ids, without the names,
    hands B a result laid out for A (4 or more devices; none where there are fewer)."""
    ids = [int(d.id) for d in jax.devices()]
    options = swapped_names(contract, ids)
    if not options:
        return []
    a = draw(st.sampled_from(options))
    b = Mesh(a.devices, tuple(reversed(a.axis_names)))
    form = draw(forms(contract, [a, b]))
    if not (fits(contract, form, a) and fits(contract, form, b)):
        return []
    return [Step(draw(calls_of(contract, mesh, form))) for _ in range(2) for mesh in (a, b)]


@st.composite
def moves(draw: st.DrawFn, contract: Contract) -> list[Step]:
    """A result passed back (where one can be: the judge skips the step where none is), a NumPy
    first argument rewritten in place and given again, twice, a call that raises between two calls
    of one key, the clocks 10 minutes ahead between two calls."""
    mesh = draw(mesh_strategy(contract, "contract-axes"))
    if not can_raise(contract, mesh):  # where the contract has an error, a mesh that can bring it
        mesh = _raising_mesh(contract) or mesh
    form = draw(forms(contract, [mesh]))
    first = draw(calls_of(contract, mesh, form))
    made = [Step(first)]
    spec = [k for k, s in enumerate(out_specs(contract)) if s in contract.first.layouts]
    if spec and LAYOUTS in contract.first.placements:
        again = draw(calls_of(contract, mesh, form))
        made.append(
            Step(
                replace(
                    again, placements=(Placed(LAYOUTS, out_specs(contract)[spec[0]]), *again.placements[1:])
                ),
                back=(1, spec[0]),
            )
        )
    if NUMPY in contract.first.placements:  # the caller's own buffer, refilled: not the last result
        host = draw(calls_of(contract, mesh, form, placement=NUMPY))
        made.append(Step(host))
        k = len(made)
        made += [Step(_again(draw, contract, host), rewritten=k) for _ in range(2)]
    if can_raise(contract, mesh):
        bad = draw(
            calls_of(contract, mesh, draw(forms(contract, [mesh], indivisible=True)), indivisible=True)
        )
        made += [Step(bad, raises=True), Step(draw(calls_of(contract, mesh, form)))]
    if jax.process_count() == 1:
        made += [Step(draw(calls_of(contract, mesh, form)), clocks=600)]
    return made


@st.composite
def first_calls(draw: st.DrawFn, contract: Contract) -> list[list[Step]]:
    """Histories for fresh processes: one form called first under ``jax.default_device(the last
    device)`` over a mesh A, then over other devices and A again, without a context; where JAX has
    a mesh context, the same with the first call under ``jax.set_mesh(A)``.  Where the function
    may be given no mesh, another: its first call given none under ``jax.default_device(the last
    device)``, then plain calls given none (their results on the first device, as always), and
    the plain calls of the others end with one given none.  A function that keeps what its first
    call saw (the default device, the context's mesh) lays the later results out wrong."""
    every = [int(d.id) for d in jax.devices()]
    found = []
    no_mesh = [GIVEN_NOTHING] if contract.mesh == MESH_NONE else [GIVEN_NONE, GIVEN_NOTHING]
    if contract.mesh == MESH_NONE or contract.mesh_optional:
        alone = default_mesh(contract)
        form = draw(forms(contract, [alone]))
        given = draw(st.sampled_from(no_mesh))
        first = Step(draw(calls_of(contract, alone, form, given=given)), under=("default_device", every[-1]))
        found.append([first, *(Step(draw(calls_of(contract, alone, form, given=g))) for g in no_mesh)])
    if contract.mesh == MESH_NONE:
        return found
    a = draw(mesh_strategy(contract, "contract-axes"))
    b = move(contract, "other-devices", a, draw)
    form = draw(forms(contract, [a, b]))
    plain = [Step(draw(calls_of(contract, mesh, form))) for mesh in (b, a) if fits(contract, form, mesh)]
    if contract.mesh_optional:
        plain.append(Step(draw(calls_of(contract, a, form, given=draw(st.sampled_from(no_mesh))))))
    found.append([Step(draw(calls_of(contract, a, form)), under=("default_device", every[-1])), *plain])
    if context.set_mesh_available():
        found.append([Step(draw(calls_of(contract, a, form)), under=("set_mesh",)), *plain])
    return found


def _raising_mesh(contract: Contract) -> Mesh | None:
    """A mesh of every device whose first layout splits the first argument most, where a shape it
    does not divide can be given (``can_raise``); None where none can."""
    ids = [int(d.id) for d in jax.devices()]
    found = [make_mesh(ids, shape, names) for shape, names in arrangements(contract, len(ids))]
    rank = contract.first.rank or 1
    raising = [m for m in found if can_raise(contract, m) and within_sides(contract, m)]
    return max(raising, key=lambda m: math.prod(split(contract.first.layouts[0], m, rank)), default=None)


PLANNED: dict[str, Callable[[Contract], st.SearchStrategy[list[Step]]]] = {
    "stale": stale,
    "joined": joined,
    "depth": depth,
    "wide": wide,
    "names": names_swapped,
    "moves": moves,
}


def planned(contract: Contract) -> Iterator[tuple[str, st.SearchStrategy[list[Step]]]]:
    """The planned histories (2 or more devices: a contract's meshes split)."""
    for name, strategy in PLANNED.items():
        yield name, strategy(contract)


# ---------------------------------------------------------------------------
# --case tokens


def _spec_json(spec: PartitionSpec | None) -> Any:
    if spec is None:
        return None
    return [list(e) if isinstance(e, tuple) else e for e in tuple(spec)]


def _spec_of(data: Any) -> PartitionSpec | None:
    if data is None:
        return None
    return PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in data])


def encode(history: Sequence[Step]) -> str:
    """The ``--case`` token of ``history``: every call's mesh, values and placements, exactly."""
    out = []
    for step in history:
        call = step.call
        out.append(
            {
                "ids": np.vectorize(lambda d: int(d.id), otypes=[np.int64])(call.mesh.devices).tolist(),
                "axes": list(call.mesh.axis_names),
                "args": [
                    {
                        "dtype": host.dtype.name,
                        "shape": list(host.shape),
                        "values": base64.b64encode(np.ascontiguousarray(host).tobytes()).decode(),
                        "kind": p.kind,
                        "spec": _spec_json(p.spec),
                        "on": list(p.ids),
                        "memory": p.memory,
                        "form": p.form,
                    }
                    for host, p in zip(call.hosts, call.placements, strict=True)
                ],
                "back": list(step.back) if step.back else None,
                "rewritten": step.rewritten,
                "raises": step.raises,
                "clocks": step.clocks,
                "under": list(step.under),
                "given": call.given,
            }
        )
    raw = json.dumps({"history": TOKEN_VERSION, "steps": out}, separators=(",", ":")).encode()
    return "h" + base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode()


def decode(contract: Contract, token: str, devices: int | None = None) -> list[Step]:
    """The history a token names (``TokenError`` where it is not one of this contract's);
    ``devices``: how many there are, to check the ids against without starting JAX."""
    try:
        if not token.startswith("h"):
            raise ValueError("not a declared contract's history token")
        data = json.loads(zlib.decompress(base64.urlsafe_b64decode(token[1:].encode("ascii"))))
        if data.get("history") != TOKEN_VERSION:
            raise ValueError(f"made by another version of the kit ({data.get('history')})")
        found = []
        for k, one in enumerate(data["steps"], 1):
            ids = np.array(one["ids"], dtype=np.int64)
            under = one.get("under") or []
            used = max(int(ids.max()), int(under[1]) if under[:1] == ["default_device"] else 0)
            if devices is not None and used >= devices:
                raise ValueError(f"call {k} uses device {used}, there are {devices} (--devices)")
            if under and under[0] not in ("default_device", "set_mesh"):
                raise ValueError(f"call {k} is under an unknown context {under[0]!r}")
            given = one.get("given", GIVEN_MESH)
            allowed = (
                [GIVEN_NOTHING]
                if contract.mesh == MESH_NONE
                else list(GIVEN_KINDS)
                if contract.mesh_optional
                else [GIVEN_MESH]
            )
            if given not in allowed:
                raise ValueError(f"call {k} hands the mesh over as {given!r}, the contract as {allowed}")
            for arg in one["args"]:
                form = arg.get("form", "")
                if form and (arg["kind"] != NUMPY or form not in NUMPY_FORMS):
                    raise ValueError(f"call {k} has a {arg['kind']} argument of an unknown form {form!r}")
            rewritten = one.get("rewritten")
            if rewritten is not None and not (isinstance(rewritten, int) and 1 <= rewritten < k):
                raise ValueError(f"call {k} rewrites the arrays of call {rewritten}, not of an earlier call")
            if len(one["args"]) != len(contract.arguments):
                raise ValueError(
                    f"call {k} has {len(one['args'])} arguments, the contract {len(contract.arguments)}"
                )
            found.append(one)
    except (ValueError, KeyError, TypeError, zlib.error, UnicodeError) as exc:
        raise TokenError(str(exc)) from None
    if devices is not None:
        return []  # checked; the steps are made once JAX has started
    return [_step(contract, one) for one in found]


def _step(contract: Contract, one: dict[str, Any]) -> Step:
    import jax.numpy as jnp

    ids = np.array(one["ids"], dtype=np.int64)
    mesh = make_mesh([int(i) for i in ids.flat], tuple(ids.shape), tuple(one["axes"]))
    hosts, placements = [], []
    for arg in one["args"]:
        dtype = np.dtype(jnp.dtype(arg["dtype"]))
        raw = base64.b64decode(arg["values"])
        hosts.append(np.frombuffer(raw, dtype=dtype).reshape(arg["shape"]).copy())
        form = arg.get("form", "")
        placements.append(Placed(arg["kind"], _spec_of(arg["spec"]), tuple(arg["on"]), arg["memory"], form))
    back = tuple(one["back"]) if one["back"] else None
    call = Call(contract, mesh, tuple(hosts), tuple(placements), one.get("given", GIVEN_MESH))
    under = tuple(one.get("under") or ())
    rewritten = one.get("rewritten")
    return Step(
        call,
        back=back,  # type: ignore[arg-type]
        rewritten=None if rewritten is None else int(rewritten),
        raises=bool(one["raises"]),
        clocks=int(one["clocks"]),
        under=under,
    )
