"""The inputs of a declared contract: calls, histories of calls, and inputs that must raise.

A ``Call`` is one call of the function: a mesh, each argument's host values and placement
(``Placed``: committed with one of its layouts over the mesh, a NumPy array, or any other kind
its ``Argument.placements`` names).  It makes fresh arrays on each ``arguments()`` (a donating
function deletes them), names itself in words, and has a ``key``: what a correct jit compiles
once for (the mesh's devices and axes, each argument's shape, dtype and placement).  Strategies
are built from the library's (meshes, values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from conformance._src.calling.devices import jax_version, other_memory_kinds
from conformance._src.declared.contract import (
    MESH_KEYWORD,
    MESH_NONE,
    NUMPY,
    NUMPY_FORMS_KIND,
    Argument,
    Contract,
    dtypes_held,
    tied_shape,
    values_for,
)
from conformance._src.library.show import mesh_text
from conformance._src.library.strategies import meshes, values

LAYOUTS, UNCOMMITTED, DEVICE, ELSEWHERE, MEMORY = (
    "layouts",
    "uncommitted",
    "device",
    "elsewhere",
    "memory-kinds",
)
# The kinds a run of several processes gives: each process holds its part of one global array
# (or the same NumPy values); an array on one process's device, or uncommitted on each, is none.
ACROSS_PROCESSES = (LAYOUTS, NUMPY, NUMPY_FORMS_KIND, ELSEWHERE, MEMORY)


# The NumPy arrays users also have, besides a plain one: every other row of a larger buffer; a
# reversed view of a reversed copy; the other byte order ('>f4' here); read-only.
NUMPY_FORMS = ("strided", "reversed", "byteswapped", "readonly")


def swaps(dtype: np.dtype) -> bool:
    """Whether ``dtype`` has another byte order (not one byte wide, nor bfloat16 and the like)."""
    return dtype.itemsize > 1 and dtype.kind in "iufc"


def may_refuse(form: str, dtype: np.dtype, error: BaseException) -> bool:
    """Whether raising ``error`` for a NumPy argument of ``form`` and ``dtype`` is a refusal every
    contract allows: JAX itself refuses arrays in the other byte order (``TypeError``;
    ``jax.device_put`` reads their bytes as native), so a function may refuse them too, with a
    TypeError or ValueError, as long as it neither returns wrong values nor changes the array."""
    return form == "byteswapped" and swaps(dtype) and isinstance(error, (TypeError, ValueError))


def numpy_form(values: np.ndarray, form: str) -> np.ndarray:
    """``values`` (a fresh copy, which it may become) as a NumPy array of the given form
    (``NUMPY_FORMS``, or "" for itself); views run along the first axis."""
    if form == "strided":
        buffer = np.empty((2 * len(values), *values.shape[1:]), values.dtype)
        buffer[::2] = values
        buffer[1::2] = values[::-1] if len(values) else values  # other values between: reading them shows
        return buffer[::2]
    if form == "reversed":
        return values[::-1].copy()[::-1]
    if form == "byteswapped":
        if swaps(values.dtype):
            return values.astype(values.dtype.newbyteorder())
        return values  # one byte (or bfloat16, which has no swapped form): nothing to swap
    if form == "readonly":
        values.flags.writeable = False
    return values


@dataclass(frozen=True)
class Placed:
    """Where one argument of a call comes from: one of ``Argument.placements``' kinds.

    ``layouts``: committed to ``spec`` over the call's mesh; ``numpy``; ``uncommitted``: a
    ``jax.Array`` on the default device, not committed; ``device``: committed to device
    ``ids[0]``; ``elsewhere``: committed to ``spec`` over the mesh of devices ``ids`` (the call's
    mesh's shape and axes over other devices, or the same ones in another order);
    ``memory-kinds``: ``spec`` over the call's mesh, in memory kind ``memory``; ``numpy``: of
    ``form`` (``NUMPY_FORMS``, or "" for a plain array).
    """

    kind: str
    spec: PartitionSpec | None = None
    ids: tuple[int, ...] = ()
    memory: str | None = None
    form: str = ""  # numpy: one of NUMPY_FORMS, or "" for a plain array

    def make(self, host: np.ndarray, mesh: Mesh) -> Any:
        """A fresh argument of ``host``'s values, placed so."""
        if self.kind == NUMPY:
            return numpy_form(np.array(host), self.form)
        if self.kind == UNCOMMITTED:
            return jax.device_put(np.array(host))
        by_id = {int(d.id): d for d in jax.devices()}
        if self.kind == DEVICE:
            return jax.device_put(np.array(host), by_id[self.ids[0]])
        assert self.spec is not None, self
        if self.kind == ELSEWHERE:
            devices = np.array([by_id[i] for i in self.ids]).reshape(mesh.devices.shape)
            mesh = Mesh(devices, mesh.axis_names)
        sharding = NamedSharding(mesh, self.spec)
        if self.kind == MEMORY and self.memory is not None:
            sharding = sharding.with_memory_kind(self.memory)
        return _committed(host, sharding)

    def describe(self, mesh: Mesh) -> str:
        if self.kind == NUMPY:
            return f"a NumPy array ({self.form})" if self.form else "a NumPy array"
        if self.kind == UNCOMMITTED:
            return "an uncommitted jax.Array (on the default device)"
        if self.kind == DEVICE:
            return f"committed to device {self.ids[0]} alone"
        if self.kind == ELSEWHERE:
            devices = np.array(self.ids).reshape(mesh.devices.shape).tolist()
            same = set(self.ids) == {int(d.id) for d in mesh.devices.flat}
            where = "the same devices in another order" if same else "other devices"
            return f"committed to {self.spec} over {where}, mesh_from_ids({devices}, {mesh.axis_names})"
        if self.kind == MEMORY:
            return f"committed to {self.spec}, in memory kind {self.memory!r}"
        return f"committed to {self.spec}"


# How a call hands the function its mesh: ``mesh=`` the call's mesh; ``mesh=None``; no mesh at
# all.  The last two ask for the first device (``Contract.mesh_optional``; always the last for
# ``mesh="none"``): the call's mesh is then ``default_mesh``, the result's target and what its
# arguments are placed about (committed there, elsewhere, in another memory kind).
GIVEN_MESH, GIVEN_NONE, GIVEN_NOTHING = "mesh", "none", "omit"
GIVEN_KINDS = (GIVEN_MESH, GIVEN_NONE, GIVEN_NOTHING)


def givens(contract: Contract) -> tuple[str, ...]:
    """How a drawn call may hand over its mesh: every way where the mesh is optional, in one
    process (across processes the first device is one process's: each call is given its mesh)."""
    return GIVEN_KINDS if contract.mesh_optional and jax.process_count() == 1 else (GIVEN_MESH,)


def default_mesh(contract: Contract) -> Mesh:
    """The first device alone, each of the contract's axes of size 1: where a function given no
    mesh lays its result out."""
    axes = contract.mesh_axes
    return Mesh(np.array(jax.devices()[:1]).reshape((1,) * len(axes)), axes)


@dataclass(frozen=True)
class Call:
    """One call: the arguments' values (``hosts``), each placed (``placements``) on or about
    ``mesh``, the mesh handed over as ``given`` says (``GIVEN_MESH``, ``GIVEN_NONE``,
    ``GIVEN_NOTHING``)."""

    contract: Contract
    mesh: Mesh
    hosts: tuple[np.ndarray, ...]
    placements: tuple[Placed, ...]
    given: str = GIVEN_MESH

    def arguments(self) -> list[Any]:
        """Fresh arguments, each placed as drawn (``Placed``)."""
        return [p.make(h, self.mesh) for h, p in zip(self.hosts, self.placements, strict=True)]

    def may_refuse(self, error: BaseException) -> bool:
        """Whether ``error`` is a refusal the contract allows (``may_refuse``, for any argument)."""
        return any(
            p.kind == NUMPY and may_refuse(p.form, h.dtype, error)
            for h, p in zip(self.hosts, self.placements, strict=True)
        )

    def keywords(self) -> dict[str, Any]:
        kwargs = dict(self.contract.keywords)
        if self.contract.mesh == MESH_KEYWORD and self.given != GIVEN_NOTHING:
            kwargs["mesh"] = self.mesh if self.given == GIVEN_MESH else None
        return kwargs

    def key(self) -> tuple[Any, ...]:
        ids = tuple(int(d.id) for d in self.mesh.devices.flat)
        return (
            ids,
            self.mesh.axis_names,
            tuple(self.mesh.devices.shape),
            tuple((h.shape, h.dtype.name, p) for h, p in zip(self.hosts, self.placements, strict=True)),
            self.given,
        )

    def jit_key(self) -> tuple[Any, ...]:
        """``key`` without the placements: what a correct function compiles once for, where JAX's
        jit compiles apart for each kind of array it is given (jit_probe.compile_allowed)."""
        ids, names, shape, arguments, given = self.key()
        return ids, names, shape, tuple(argument[:2] for argument in arguments), given

    def describe(self) -> str:
        parts = []
        for arg, host, placement in zip(self.contract.arguments, self.hosts, self.placements, strict=True):
            parts.append(f"{arg.name}: {host.dtype.name}{list(host.shape)} {placement.describe(self.mesh)}")
        if self.given == GIVEN_MESH:
            return f"{'; '.join(parts)}; mesh {mesh_text(self.mesh)}"
        how = "mesh=None" if self.given == GIVEN_NONE else "no mesh"
        return f"{'; '.join(parts)}; {how}: the first device"

    def values_text(self) -> str:
        with np.printoptions(threshold=40, edgeitems=3, precision=6):
            text = "; ".join(
                f"{a.name} = {np.array2string(h, separator=', ')}"
                for a, h in zip(self.contract.arguments, self.hosts, strict=True)
            )
        return text.replace("\n", "\n" + " " * 12)  # under the block's "  values:   " label


def _committed(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """``host`` committed to ``sharding``; across processes, each process makes its own shards."""
    if jax.process_count() == 1:
        return jax.device_put(host, sharding)
    return jax.make_array_from_callback(
        host.shape, sharding, lambda index: host[index].copy(), dtype=host.dtype
    )


def split(spec: PartitionSpec, mesh: Mesh, ndim: int) -> tuple[int, ...]:
    """How many parts the layout splits each of ``ndim`` dimensions into on ``mesh``."""
    parts = [1] * ndim
    for d, entry in enumerate(tuple(spec)[:ndim]):
        if entry is None:
            continue
        for name in entry if isinstance(entry, tuple) else (entry,):
            parts[d] *= int(mesh.shape[name])
    return tuple(parts)


def divides(spec: PartitionSpec, mesh: Mesh, shape: tuple[int, ...]) -> bool:
    return len(tuple(spec)) <= len(shape) and all(
        s % p == 0 for s, p in zip(shape, split(spec, mesh, len(shape)), strict=True)
    )


def _out_specs(contract: Contract) -> list[PartitionSpec]:
    return [
        s for s in jax.tree_util.tree_leaves(contract.out, is_leaf=lambda v: isinstance(v, PartitionSpec))
    ]


def _multiples(contract: Contract, arg: Argument, mesh_list: list[Mesh], ndim: int) -> list[int]:
    """Each side of ``arg`` a multiple of what every layout it comes in (and, for the first, the
    result's layouts of its rank) splits that side into, on every mesh of the history."""
    specs = list(arg.layouts)
    if arg is contract.first:
        specs += [s for s in _out_specs(contract) if len(tuple(s)) <= ndim]
    multiple = [1] * ndim
    for mesh in mesh_list:
        for spec in specs:
            for d, parts in enumerate(split(spec, mesh, ndim)):
                multiple[d] = math.lcm(multiple[d], parts)
    return multiple


# Sides up to this many times the least are drawn evenly; a wider range octave by octave.
OCTAVES_ABOVE = 64
# Where a contract allows sides of 0 (min_side=0), one side in this many is 0.
EMPTY_ONE_IN = 8
# JAX's jit splits a length-0 side over 2 or more devices from this release on; before it, it
# raises AssertionError (contract/jax_bugs.py, EMPTY_SPLIT): there, a side of 0 is drawn only
# where its layouts do not split it.
JIT_SPLITS_EMPTY_FROM = (0, 9, 1)


@st.composite
def _side(draw: st.DrawFn, multiple: int, contract: Contract) -> int:
    """A side ``multiple`` divides, within the contract's sides (none where ``multiple`` is past
    ``max_side``: the stated largest side holds, and such a draw is rejected)."""
    most = contract.max_side // multiple
    assume(most >= 1)
    if (
        contract.min_side == 0
        and (multiple == 1 or jax_version() >= JIT_SPLITS_EMPTY_FROM)
        and draw(st.integers(1, EMPTY_ONE_IN)) == EMPTY_ONE_IN  # shrinks away from the empty side
    ):
        return 0
    least = min(max(1, -(-contract.min_side // multiple)), most)
    if most <= OCTAVES_ABOVE * least:
        return multiple * draw(st.integers(least, most))
    # A wide range: its octave first, each as likely (shrinking to the lowest), so that long sides
    # are drawn as often as short ones and most calls stay small.
    octave = draw(st.integers(least.bit_length() - 1, most.bit_length() - 1))
    return multiple * draw(st.integers(max(least, 1 << octave), min(most, (2 << octave) - 1)))


@st.composite
def _host(draw: st.DrawFn, arg: Argument, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    return draw(values(dtype=dtype, shape=shape, **dict(values_for(arg, dtype))))


def fits(contract: Contract, form: Form, mesh: Mesh) -> bool:
    """Does every layout of every argument (and the result's, for the first) divide ``form`` on ``mesh``?"""
    for arg, shape in zip(contract.arguments, form.shapes, strict=True):
        multiple = _multiples(contract, arg, [mesh], len(shape))
        if any(s % m for s, m in zip(shape, multiple, strict=True)):
            return False
    return True


def _split_sides(contract: Contract, mesh_list: list[Mesh]) -> list[int]:
    """What the layouts split each side drawn on its own into, on every mesh of ``mesh_list``."""
    return [
        m
        for arg in contract.arguments
        if arg.shape is None or arg is contract.first
        for m in _multiples(contract, arg, mesh_list, arg.rank or 1)
    ]


def within_sides(contract: Contract, mesh: Mesh) -> bool:
    """Can one form be called on ``mesh`` with every side within ``max_side``?"""
    return max(_split_sides(contract, [mesh])) <= contract.max_side


def _within(contract: Contract, mesh_list: list[Mesh]) -> list[Mesh]:
    """The meshes of ``mesh_list`` one form can be called on, in order, with every side that
    every one of them splits still within ``max_side`` (the first always)."""
    kept: list[Mesh] = []
    for mesh in mesh_list:
        if not kept or max(_split_sides(contract, [*kept, mesh])) <= contract.max_side:
            kept.append(mesh)
    return kept


@dataclass(frozen=True)
class Form:
    """The shapes and dtypes of one call's arguments (what a history calls again and again)."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]


@st.composite
def forms(
    draw: st.DrawFn,
    contract: Contract,
    mesh_list: list[Mesh],
    *,
    indivisible: bool = False,
    dtype: str | None = None,
) -> Form:
    """The shapes and dtypes of a call on the meshes of ``mesh_list`` that can take one form
    within ``max_side`` (``_within``: a caller calls it only where it ``fits``)."""
    first = contract.first
    rank = first.rank or 1
    mesh_list = _within(contract, mesh_list)
    multiple = _multiples(contract, first, mesh_list, rank)
    first_shape = tuple(draw(_side(m, contract)) for m in multiple)
    if indivisible:  # one side split in parts that do not divide it
        split_sides = [d for d, m in enumerate(split(first.layouts[0], mesh_list[0], rank)) if m > 1]
        assume(split_sides)
        d = draw(st.sampled_from(split_sides))
        parts = split(first.layouts[0], mesh_list[0], rank)[d]
        sides = list(first_shape)
        sides[d] = draw(st.sampled_from([v for v in range(1, contract.max_side + 1) if v % parts]))
        first_shape = tuple(sides)
    shapes = [first_shape]
    for arg in contract.arguments[1:]:
        if arg.shape is not None:  # tied to the first argument's sides, each free one drawn
            tied = tied_shape(arg, first_shape)
            own = _multiples(contract, arg, mesh_list, len(tied))
            shapes.append(
                tuple(draw(_side(m, contract)) if s is None else s for s, m in zip(tied, own, strict=True))
            )
        else:
            own = _multiples(contract, arg, mesh_list, arg.rank or 1)
            shapes.append(tuple(draw(_side(m, contract)) for m in own))
    dtype = dtype or draw(st.sampled_from(dtypes_held(first)))
    dtypes = [dtype] + [
        draw(st.sampled_from(dtypes_held(a))) if a.dtypes else dtype for a in contract.arguments[1:]
    ]
    return Form(tuple(shapes), tuple(dtypes))


def _kinds(arg: Argument, mesh: Mesh, shape: tuple[int, ...], *, first_raw: bool) -> list[str]:
    """The placement kinds ``arg`` may come in here: a layout that does not divide the shape can
    come only as NumPy; ``elsewhere`` needs other devices or another order of them."""
    layouts = [s for s in arg.layouts if divides(s, mesh, shape)]
    kinds = [
        k
        for k in arg.placements
        if k in (NUMPY, NUMPY_FORMS_KIND, UNCOMMITTED, DEVICE)
        or (layouts and not first_raw and (k != ELSEWHERE or len(jax.devices()) > 1))
    ]
    if first_raw:
        kinds = [k for k in kinds if k == NUMPY]
    if jax.process_count() > 1:
        kinds = [k for k in kinds if k in ACROSS_PROCESSES]
    return kinds


@st.composite
def _placed(draw: st.DrawFn, kind: str, arg: Argument, mesh: Mesh, shape: tuple[int, ...]) -> Placed:
    if kind == NUMPY_FORMS_KIND:
        return Placed(NUMPY, form=draw(st.sampled_from(NUMPY_FORMS)))
    if kind in (NUMPY, UNCOMMITTED):
        return Placed(kind)
    if kind == DEVICE:
        return Placed(kind, ids=(int(draw(st.sampled_from(jax.devices())).id),))
    spec = draw(st.sampled_from([s for s in arg.layouts if divides(s, mesh, shape)]))
    if kind == MEMORY:
        return Placed(kind, spec, memory=draw(st.sampled_from(other_memory_kinds())))
    if kind == ELSEWHERE:
        own = [int(d.id) for d in mesh.devices.flat]
        every = [int(d.id) for d in jax.devices()] if jax.process_count() == 1 else own
        ids = [int(i) for i in draw(st.permutations(every))][: len(own)]
        if ids == own:  # never the call's own mesh: another device, or the same ones in another order
            ids = ids[1:] + ids[:1] if len(own) > 1 else [next(i for i in every if i != own[0])]
        return Placed(kind, spec, ids=tuple(ids))
    return Placed(LAYOUTS, spec)


@st.composite
def calls_of(
    draw: st.DrawFn,
    contract: Contract,
    mesh: Mesh,
    form: Form,
    *,
    indivisible: bool = False,
    placement: str | None = None,
    given: str = GIVEN_MESH,
) -> Call:
    """A call on ``mesh`` of ``form``: each argument's values, and its placement drawn from the
    kinds it may come in (``placement``: the first argument's, where it may come so;
    ``"numpy-forms/FORM"`` names one of ``NUMPY_FORMS``); the mesh
    handed over as ``given`` says (a function that takes none is never handed one)."""
    if contract.mesh == MESH_NONE:
        given = GIVEN_NOTHING
    if given != GIVEN_MESH:  # no mesh handed over: the arguments are placed about the first device's
        mesh = default_mesh(contract)
    hosts, placements = [], []
    wanted, _, numpy_as = (placement or "").partition("/")  # "numpy-forms/byteswapped": that form
    for k, (arg, shape, dtype) in enumerate(zip(contract.arguments, form.shapes, form.dtypes, strict=True)):
        kinds = _kinds(arg, mesh, shape, first_raw=indivisible and k == 0)
        if k == 0 and wanted in kinds:
            kinds = [wanted]
        assume(kinds)
        kind = draw(st.sampled_from(kinds))
        if k == 0 and numpy_as and kind == NUMPY_FORMS_KIND:
            assume(numpy_as != "byteswapped" or swaps(np.dtype(jax.numpy.dtype(dtype))))  # has another order
            placements.append(Placed(NUMPY, form=numpy_as))
        else:
            placements.append(draw(_placed(kind, arg, mesh, shape)))
        hosts.append(draw(_host(arg, dtype, shape)))
    return Call(contract, mesh, tuple(hosts), tuple(placements), given)


# Meshes by class, each given in every run (Kit.search): one device; exactly the
# contract's axes over several devices; the contract's axes and one more, every axis of 2 or more
# devices (the extra one replicates).
MESH_KINDS = ("one-device", "contract-axes", "extra-axis")


def mesh_strategy(contract: Contract, kind: str | None = None) -> st.SearchStrategy[Mesh]:
    """Meshes with the contract's axes over any devices in any order (``kind``: of that class of
    ``MESH_KINDS``, where there are devices for it); across processes, over every device (each
    process takes part in every call), in any order and factorisation."""
    axes, every = contract.mesh_axes, len(jax.devices())
    least = every if jax.process_count() > 1 else 1
    if (kind == "one-device" and least == 1) or every == 1:  # one device: all there is (one chip)
        return meshes(with_axes=axes, max_size=1)
    if kind == "contract-axes" and every >= 2:
        return meshes(axis_names=axes, min_size=max(least, 2))
    if kind == "extra-axis" and every >= extra_axis_devices(contract):
        return meshes(with_axes=axes, ndims=len(axes) + 1, min_axis_size=2, min_size=least)
    return meshes(with_axes=axes, min_size=least)


def extra_axis_devices(contract: Contract) -> int:
    """The devices an ``extra-axis`` mesh needs: the contract's axes and one more, each of 2."""
    return 2 ** (len(contract.mesh_axes) + 1)


def out_of_reach(contract: Contract) -> list[str]:
    """The mesh classes of ``MESH_KINDS`` these devices (2 or more) cannot make, each with what it
    needs: a run that judged without one did not judge the whole contract (its status is
    PARTIAL).  Across processes one-device meshes are not made (every process takes part in
    every call): a one-process run judges them."""
    every, needed = len(jax.devices()), extra_axis_devices(contract)
    out = []
    if every < needed:
        axes = (
            f"{len(contract.mesh_axes)} axis"
            if len(contract.mesh_axes) == 1
            else f"{len(contract.mesh_axes)} axes"
        )
        out.append(
            f"inputs on extra-axis meshes (the contract's {axes} and one more, every axis of 2 or more "
            f"devices): they need {needed} devices, there are {every} (--devices {needed})"
        )
    return out


@st.composite
def calls(
    draw: st.DrawFn,
    contract: Contract,
    dtype: str | None = None,
    placement: str | None = None,
    mesh_kind: str | None = None,
) -> Call:
    """One call of the contract's domain: a mesh, shapes the layouts divide, dtypes, placements
    (``dtype``: the first argument's, else any of its dtypes; ``placement``: the first argument's
    kind, else any it may come in; ``mesh_kind``: the mesh's class, else any mesh).  Where the
    mesh is optional, a third of the calls hand over ``mesh=None`` and a third none at all."""
    mesh = draw(mesh_strategy(contract, mesh_kind))
    form = draw(forms(contract, [mesh], dtype=dtype))
    given = draw(st.sampled_from(givens(contract)))
    return draw(calls_of(contract, mesh, form, placement=placement, given=given))


@st.composite
def raising_calls(
    draw: st.DrawFn, contract: Contract, dtype: str | None = None, mesh_kind: str | None = None
) -> Call:
    """A call whose first argument has a side that its first layout's parts do not divide
    (given as a NumPy array: JAX cannot commit it to that layout); never on one device, which
    splits nothing."""
    mesh = draw(mesh_strategy(contract, None if mesh_kind == "one-device" else mesh_kind))
    form = draw(forms(contract, [mesh], indivisible=True, dtype=dtype))
    return draw(calls_of(contract, mesh, form, indivisible=True))


@dataclass(frozen=True)
class History:
    calls: tuple[Call, ...]

    def describe(self) -> str:
        return f"{len(self.calls)} call(s)"


@st.composite
def histories(
    draw: st.DrawFn,
    contract: Contract,
    dtype: str | None = None,
    placement: str | None = None,
    mesh_kind: str | None = None,
    *,
    max_calls: int = 8,
) -> History:
    """Calls in an order Hypothesis searches and shrinks: over up to 3 meshes (any devices, any
    order, often alike in shape; ``mesh_kind``: all of that class) and up to 2 forms, each step
    one of them, with fresh values; keys come back, after others and in a row."""
    mesh_list = draw(
        st.lists(mesh_strategy(contract, mesh_kind), min_size=1, max_size=3, unique_by=lambda m: id(m))
    )
    form_list = draw(st.lists(forms(contract, mesh_list, dtype=dtype), min_size=1, max_size=2))
    pairs = [
        (m, f)
        for m, mesh in enumerate(mesh_list)
        for f, form in enumerate(form_list)
        if fits(contract, form, mesh)
    ]
    steps = draw(st.lists(st.sampled_from(pairs), min_size=2, max_size=max_calls))
    made = [draw(calls_of(contract, mesh_list[m], form_list[f], placement=placement)) for m, f in steps]
    return History(tuple(made))
