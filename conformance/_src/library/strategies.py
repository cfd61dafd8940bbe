"""The bodies of the public general strategies (``conformance.strategies``: read its docstring),
and the kit's own helpers beside them (``values_from``, ``OTHER_AXIS``, the device messages).
The ``pjit_double`` contract's strategies (``lengths``, ``placements``, ``cases``,
``dtypes(contract=...)``) build on these in ``inputs/strategies.py``: nothing here knows a contract.

The dtypes, what each dtype's values are drawn as, and the element strategies under value
controls live in ``dtypes.py``; the arrays, meshes, specs, shardings and shapes here."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from hypothesis import assume, currently_in_test_context, note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp
from jax.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec, Sharding

from conformance._src import internals
from conformance._src.library.dtypes import (
    Controls,
    carrier,
    cast_element,
    complex_part,
    controls,
    dtype_arg,
    element_strategy,
    is_x64,
    needs_x64,
    x64_enabled,
)
from conformance._src.library.dtypes import check as _check
from conformance._src.library.show import make_mesh, mesh_from_ids, mesh_ids, mesh_text, sharding_text
from conformance._src.library.structure import (
    Structure,
    check_dtype,
    check_feasible,
    check_shape,
    row_axis,
    rows_fit,
    structure_arg,
    structured,
)
from conformance._src.library.values import TILE

# The names ``meshes`` gives a drawn mesh's axes where none are asked for: these two, then
# 'axis2', 'axis3', ... (``default_axes=`` names the first two otherwise).
FIRST_AXIS = "data"
OTHER_AXIS = "model"
# The mesh kinds of ``meshes(kind=...)``, and the fewest devices each is drawn on.
KIND_DEVICES = {"1d": 1, "2d": 4, "2d-data1": 2}
EDGE_ROOM = 4  # a vector of EDGE_ROOM times as many elements as edges holds every edge (background)
_DRAWN_ELEMENTS = 16  # at most this many elements are drawn one by one, at drawn positions
_PALETTE = (4, 16)  # with value controls, a background of this many drawn elements (at least, at most)


def background(
    rng: np.random.Generator,
    dtype: np.dtype,
    length: int,
    edges: np.ndarray,
    bounds: tuple[int, int] | None = None,
) -> np.ndarray:
    """``length`` integers of ``dtype``, a different value in (nearly) every position.

    Uniform over the dtype (or over ``bounds``, inclusive) with ``edges``
    mixed in at a quarter of the positions; a vector with room for every edge
    ``EDGE_ROOM`` times over holds each one, at drawn positions (so a bug
    of one value, the largest float whose double is finite, meets it in
    every such vector).  Past ``TILE`` elements a block
    of ``TILE`` (a prime) repeats, so a long vector costs little to make and
    its ``--case`` token stays short, and no power-of-two chunk of it looks
    like another.
    """
    block = min(length, TILE)
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if bounds is None else bounds
    out = rng.integers(lo, hi, size=block, dtype=dtype, endpoint=True)
    mixed = rng.random(block) < 0.25
    out[mixed] = rng.choice(edges, size=int(mixed.sum()))
    if block >= EDGE_ROOM * len(edges):
        out[rng.choice(block, size=len(edges), replace=False)] = edges
    return np.resize(out, length) if length > block else out


def _positions(length: int) -> st.SearchStrategy[int]:
    """Where drawn elements go: anywhere, or at the tail and next to powers of two."""
    marks = sorted({i for k in range(1, 21) for i in (2**k - 1, 2**k) if i < length} | {length - 1})
    return st.one_of(st.integers(0, length - 1), st.sampled_from(marks))


@st.composite
def _vectors(
    draw: st.DrawFn,
    *,
    dtype: np.dtype,
    length: int,
    edges: np.ndarray,
    elements: st.SearchStrategy[int],
    bounds: tuple[int, int] | None = None,
) -> np.ndarray:
    """``length`` integers of ``dtype``: a background and a few elements drawn where Hypothesis likes.

    The background is one drawn element repeated or, as often, a different
    value in every position (``background``, from a generator Hypothesis
    seeds).  So a long vector is not mostly one number (what ``hnp.arrays``
    gives: it draws a few elements and fills the rest with one value), a
    defect at any position shows, and Hypothesis makes a few dozen choices
    however long the vector is.  It shrinks to a constant background with a
    few elements.
    """
    if length == 0:
        return np.zeros(0, dtype)
    if draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        out = background(rng, dtype, length, edges, bounds)
    else:
        out = np.full(length, draw(elements), dtype=dtype)
    for index, value in draw(st.lists(st.tuples(_positions(length), elements), max_size=_DRAWN_ELEMENTS)):
        out[index] = value
    return out


@st.composite
def _element_vectors(
    draw: st.DrawFn, *, dtype: np.dtype, length: int, elements: st.SearchStrategy[Any]
) -> np.ndarray:
    """``length`` values of ``dtype``, every one drawn from ``elements``: ``_vectors`` under value controls.

    The background is one drawn element repeated or, as often, filled from a
    drawn palette of 4 to 16 elements (``_PALETTE``) by a generator
    Hypothesis seeds; then a few elements at drawn positions.  So a long
    array is not mostly one value, and every value obeys the controls.  It
    shrinks to a constant background with a few elements.
    """
    if length == 0:
        return np.zeros(0, dtype)
    if draw(st.booleans()):
        drawn = draw(st.lists(elements, min_size=_PALETTE[0], max_size=_PALETTE[1]))
        palette = np.empty(len(drawn), dtype)
        for i, value in enumerate(drawn):
            palette[i] = cast_element(value, dtype)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        block = min(length, TILE)
        out = palette[rng.integers(0, len(palette), size=block)]
        out = np.resize(out, length) if length > block else out
    else:
        out = np.full(length, cast_element(draw(elements), dtype), dtype=dtype)
    for index, value in draw(st.lists(st.tuples(_positions(length), elements), max_size=_DRAWN_ELEMENTS)):
        out[index] = cast_element(value, dtype)
    return out


def values(
    *,
    dtype: np.dtype | str = "float32",
    length: int | None = None,
    shape: int | Sequence[int] | None = None,
    min_value: float | None = None,
    max_value: float | None = None,
    allow_nan: bool | None = None,
    allow_infinity: bool | None = None,
    allow_subnormal: bool | None = None,
    elements: st.SearchStrategy[Any] | None = None,
    unique: bool = False,
    structure: str | Sequence[str] | None = None,
    axis: int | None = None,
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype``: 1-D of ``length``, or of any ``shape`` (give one of them).

    Every dtype ``dtypes()`` gives: bool, integers (int4 and int2 too), the
    floats (float16, bfloat16, float32, float64, the float8 kinds) and complex.

    Without value controls, over the dtype's whole range: floats are drawn as
    bit patterns, so every exponent, both signs, NaN payloads and subnormals
    are as likely as ordinary numbers, mixed with edge values
    (``special_floats``; for the float8 kinds, every byte is a value and the
    edges come from ``ml_dtypes.finfo``).  Integers cover the full range with
    the extremes.  Complex numbers draw each component as their float type
    does.  Long arrays differ in every position, not only in a few.

    The value controls are those of ``hypothesis.extra.numpy.from_dtype``
    and ``arrays``, checked when the strategy is built:

    * ``min_value``, ``max_value``: bounds (inclusive; for complex dtypes, of
      the real and imaginary parts each).  A bound must lie in the dtype's
      finite range; between the dtype's values it is rounded inwards.
    * ``allow_nan``, ``allow_infinity``, ``allow_subnormal``: as
      ``hypothesis.strategies.floats`` reads them (``None``: NaN only without
      bounds, infinities only beyond a missing bound, subnormals if the bounds
      hold some).  ``True`` on a dtype without such values (an integer dtype,
      a float8 kind without infinities) is an error.
    * ``elements``: a strategy for the elements instead (not with the above);
      each must be a value the dtype holds exactly.
    * ``unique``: no two elements equal (``hypothesis.extra.numpy.arrays``'
      ``unique=True``; NaNs may repeat).

    Under controls every element comes from the element strategy
    (``from_dtype``'s, with the dtype's edge values that obey the controls;
    bfloat16 and the float8 kinds through float32, rounded), and a long array
    is still not mostly one value: a palette of drawn elements fills it.

    ``structure`` draws the inputs that break numerics by construction, not
    by luck: every row along ``axis`` (default the last) of every array is
    one of these kinds:

    * ``"offset"``: a large offset and a tiny spread, ``c + s*u`` with
      ``|c|/s`` about ``2**(p/2)`` (``p`` the dtype's significand bits): a
      one-pass variance ``E[x**2] - E[x]**2`` loses every digit.
    * ``"huge-max"``: a maximum finite in the dtype whose ``exp`` overflows it
      (89.7 and up in float32): a softmax without the max shift gives NaN.
    * ``"mixed-magnitudes"``: ``L`` and ``-L`` with small values below a
      quarter of ``L``'s ulp between and around them: a sum in the dtype that
      meets ``L`` first loses the small ones.

    A sequence of kinds gives the rows the kinds in turn.  Structured dtypes
    are float16, bfloat16, float32 and float64; the values are finite and
    normal, within ``min_value`` and ``max_value`` if given (a structure they
    leave no room for is an ``InvalidArgument``), and ``allow_nan=True``,
    ``allow_infinity=True``, ``elements`` and ``unique=True`` do not go with
    it.  Rows must have 2 elements or more for ``"offset"``, 3 for
    ``"mixed-magnitudes"``.

    >>> values(dtype="int8", length=4).example().dtype
    dtype('int8')
    >>> values(dtype="bfloat16", shape=(2, 3)).example().shape
    (2, 3)
    >>> x = values(dtype="float32", shape=(4, 4), min_value=-10, max_value=10,
    ...            allow_nan=False, allow_infinity=False, allow_subnormal=False).example()
    >>> bool(np.isfinite(x).all() and (np.abs(x) <= 10).all())
    True
    >>> rows = values(shape=(4, 64), structure="huge-max").example()
    >>> bool((rows.max(axis=-1) > np.log(np.finfo(np.float32).max)).all())
    True
    """
    _check((length is None) != (shape is None), "give values() a length or a shape, not both nor neither")
    wanted = controls(
        min_value=min_value,
        max_value=max_value,
        allow_nan=allow_nan,
        allow_infinity=allow_infinity,
        allow_subnormal=allow_subnormal,
        elements=elements,
        unique=unique,
    )
    how = structure_arg(structure, axis, wanted)
    dims: tuple[int, ...] | None = None
    if shape is not None:
        dims = _shape_arg(shape)
        length = math.prod(dims)
    found = dtype_arg(dtype)
    _check(isinstance(length, int) and length >= 0, f"length={length!r} must be an int >= 0")
    assert length is not None
    if how is not None:
        rows = dims if dims is not None else (length,)
        check_dtype(how, found)
        _values(found, 0, wanted)  # the bounds within the dtype's range, or InvalidArgument now
        check_shape(how, rows)
        check_feasible(how, found, wanted, rows[row_axis(how, rows)])
        return structured(dtype=found, dims=rows, how=how, wanted=wanted)
    drawn = _values(found, length, wanted)
    if dims is not None:
        shaped = dims
        return drawn.map(lambda a: a.reshape(shaped))
    return drawn


def _values(
    dtype: np.dtype, length: int, wanted: Controls, *, strict: bool = True
) -> st.SearchStrategy[np.ndarray]:
    """The body of ``values``, its arguments checked but for those that need the dtype (checked here).

    ``strict=False`` for a drawn dtype: see ``element_strategy``."""
    if not wanted.any:
        return _whole_range(dtype, length)
    found = element_strategy(dtype, wanted, strict=strict)
    if wanted.unique:
        _check(
            found.distinct is None or found.distinct >= length,
            f"unique=True needs {length} distinct values, but {dtype.name} has only {found.distinct} "
            f"values that obey the controls",
        )
        return hnp.arrays(dtype, length, elements=found.strategy, unique=True)
    return _element_vectors(dtype=dtype, length=length, elements=found.strategy)


def _whole_range(dtype: np.dtype, length: int) -> st.SearchStrategy[np.ndarray]:
    """``values`` without controls: bit patterns or integers of the dtype's carrier (``carrier``)."""
    if dtype.kind == "c":
        return _whole_range(complex_part(dtype), 2 * length).map(lambda a: a.view(dtype))
    how = carrier(dtype)
    elements = st.one_of(st.sampled_from([int(e) for e in how.edges]), st.integers(how.lo, how.hi))
    bounds = None if how.full_range else (how.lo, how.hi)
    vectors = _vectors(dtype=how.bits, length=length, edges=how.edges, elements=elements, bounds=bounds)
    return vectors.map(lambda a: how.finish(a, dtype))


def _shape_arg(shape: object) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else shape
    _check(
        isinstance(dims, (tuple, list)) and all(type(d) is int and d >= 0 for d in dims),
        f"shape={shape!r} must be an int >= 0 or a tuple of them",
    )
    assert isinstance(dims, (tuple, list))
    return tuple(dims)


def values_from(rng: np.random.Generator, dtype: np.dtype, length: int) -> np.ndarray:
    """What ``values`` draws with a different value in every position, from ``rng`` (the schedule's)."""
    if dtype.kind == "c":
        return values_from(rng, complex_part(dtype), 2 * length).view(dtype)
    how = carrier(dtype)
    bounds = None if how.full_range else (how.lo, how.hi)
    return how.finish(background(rng, how.bits, length, how.edges, bounds), dtype)


def _divisors(n: int) -> list[int]:
    return [a for a in range(1, n + 1) if n % a == 0]


def meshes(
    *,
    devices: Sequence[jax.Device] | None = None,
    min_size: int = 1,
    max_size: int | None = None,
    ndims: int | Sequence[int] | None = None,
    min_axis_size: int = 1,
    kind: str | None = None,
    axis_names: Sequence[str] | None = None,
    with_axes: Sequence[str] | None = None,
    default_axes: Sequence[str] = (FIRST_AXIS, OTHER_AXIS),
) -> st.SearchStrategy[Mesh]:
    """Meshes over any subset of ``devices`` (default: all), in any order, of any number of axes.

    Each mesh has one of ``ndims`` axes (an int or a sequence of them;
    default ``(1, 2)``) and between ``min_size`` and ``max_size`` devices,
    every axis at least ``min_axis_size`` of them, in any factorisation.
    With ``axis_names`` every mesh has exactly those axes, in that order.
    With ``with_axes`` every mesh has those axes (of any size, ``min_axis_size``
    and up) and any number of others ('data', 'model', 'axis2', ... but the
    names given), all in any order: what a function that splits over a named
    axis (``P("batch")``) runs on.  Its ``ndims`` count all the axes, the
    given ones too (default: the given ones and up to two others).  Without
    either, 1-D meshes have the single axis 'data', 2-D meshes 'data' and
    'model' in either order, and meshes of more axes 'data', 'model',
    'axis2', ... in any order.  ``default_axes`` (two distinct names) names
    those first two axes otherwise: the others are 'axis2', ... still.
    ``kind`` (a mesh kind of ``coverage.MESHES`` but ``default``) picks the
    kit's mesh kinds: ``1d``, ``2d`` (both axes of 2+ devices) or
    ``2d-data1`` (the data axis, the first of ``default_axes``, has one
    device, the rest replicates).

    Hypothesis prints a drawn mesh as the call that rebuilds it, with its
    device ids: ``mesh_from_ids([[3, 1], [0, 2]], ('data', 'model'))``
    (``conformance.devices.mesh_from_ids``; ``shown``).

    The devices are counted when drawing, so building a strategy never
    starts JAX's backend; too few of them is an ``InvalidArgument`` that
    says how to get more (``--host-devices``).  One device is too few unless
    the test asks for one-device meshes itself: ``max_size=1``, or
    ``devices=`` a list of one.

    >>> meshes(axis_names=("batch", "model"), min_axis_size=2)  # doctest: +ELLIPSIS
    ...
    >>> mesh = meshes(with_axes=("batch",), ndims=[2, 3]).example()  # doctest: +SKIP
    >>> mesh.axis_names
    ('model', 'batch', 'data')
    """
    counts = _ndims_arg(ndims)
    defaults = _names_arg("default_axes", default_axes)
    _check(len(defaults) == 2, f"default_axes={default_axes!r} must name two axes")
    required: tuple[str, ...] | None = None
    if with_axes is not None:
        required = _names_arg("with_axes", with_axes)
        _check(axis_names is None, "give meshes() with_axes or axis_names, not both")
        _check(kind is None, "give meshes() with_axes or a kind, not both")
    if kind is not None:
        _check(kind in KIND_DEVICES, f"kind={kind!r} must be '1d', '2d' or '2d-data1'")
        _check(axis_names is None, "give meshes() a kind or axis_names, not both")
        counts = (1,) if kind == "1d" else (2,)
        min_axis_size = 2 if kind == "2d" else 1
        min_size = max(min_size, KIND_DEVICES[kind])
    if axis_names is not None:
        names = _names_arg("axis_names", axis_names)
        _check(
            counts is None or counts in ((1, 2), (len(names),)),
            f"ndims={ndims!r} disagrees with axis_names={axis_names!r}: give one of them",
        )
        counts = (len(names),)
    if counts is None:
        counts = (1, 2) if required is None else tuple(range(len(required), len(required) + 3))
    # What can be checked without the devices is checked now; the device count when drawn.
    _check(
        isinstance(min_size, int)
        and 1 <= min_size
        and (max_size is None or (isinstance(max_size, int) and min_size <= max_size))
        and (devices is None or (max_size or min_size) <= len(devices)),
        f"need 1 <= min_size={min_size} <= max_size={max_size} <= the number of devices",
    )
    _check(
        len(counts) > 0 and all(type(k) is int and k >= 1 for k in counts),
        f"ndims={ndims!r} must be an int >= 1 or a non-empty sequence of them",
    )
    if required is not None:
        _check(
            all(k >= len(required) for k in counts),
            f"ndims={ndims!r}: every mesh has the {len(required)} axes of with_axes={with_axes!r}, "
            f"so no fewer axes",
        )
    _check(
        isinstance(min_axis_size, int) and min_axis_size >= 1,
        f"min_axis_size={min_axis_size!r} must be an int >= 1",
    )
    _check(
        max_size is None
        or any(_shapes(n, k, min_axis_size) for n in range(min_size, max_size + 1) for k in counts),
        f"no mesh of {min_size} to {max_size} devices has {' or '.join(map(str, counts))} axes "
        f"of >= {min_axis_size} devices each",
    )
    return _meshes(
        devices=devices,
        min_size=min_size,
        max_size=max_size,
        ndims=counts,
        min_axis_size=min_axis_size,
        data_one=kind == "2d-data1",
        axis_names=None if axis_names is None else tuple(axis_names),
        with_axes=required,
        default_axes=(defaults[0], defaults[1]),
        one_device_asked=devices is not None or max_size == 1,
    )


def _ndims_arg(ndims: object) -> tuple[Any, ...] | None:
    """``ndims`` as a tuple (an int is one count), ``None`` if not given; checked by the caller."""
    if ndims is None:
        return None
    if isinstance(ndims, int) and not isinstance(ndims, bool):
        return (ndims,)
    try:
        return tuple(ndims)  # type: ignore[arg-type]
    except TypeError:
        return ()


def _names_arg(name: str, names: object) -> tuple[str, ...]:
    """Axis names: a non-empty sequence of distinct non-empty strings (not a string itself)."""
    found: tuple[Any, ...] = ()
    if not isinstance(names, str):
        try:
            found = tuple(names)  # type: ignore[arg-type]
        except TypeError:
            pass
    _check(
        len(found) > 0 and all(isinstance(n, str) and n for n in found) and len(set(found)) == len(found),
        f"{name}={names!r} must be a non-empty sequence of distinct non-empty strings",
    )
    return found


def _other_axes(taken: Sequence[str], count: int, defaults: tuple[str, str]) -> list[str]:
    """``count`` axis names (the two ``defaults``, 'axis2', 'axis3', ...) that are not ``taken``."""
    found: list[str] = []
    k = 0
    while len(found) < count:
        name = defaults[0] if k == 0 else defaults[1] if k == 1 else f"axis{k}"
        if name not in taken and name not in found:
            found.append(name)
        k += 1
    return found


def _splits(size: int, min_axis_size: int) -> list[int]:
    """Sizes of the data axis of a 2-D mesh of ``size`` devices, both axes >= min_axis_size."""
    return [a for a in _divisors(size) if a >= min_axis_size and size // a >= min_axis_size]


def _shapes(size: int, ndim: int, least: int) -> list[tuple[int, ...]]:
    """Every mesh shape of ``ndim`` axes, each of ``least`` devices or more, over ``size`` devices."""
    if ndim == 1:
        return [(size,)] if size >= least else []
    return [(a, *rest) for a in _divisors(size) if a >= least for rest in _shapes(size // a, ndim - 1, least)]


HOW_TO_GET_DEVICES = (
    "For N forced CPU devices, run pytest with --host-devices N (or host_devices = N in its "
    "configuration), or call conformance.devices.ensure_host_devices(N) before anything starts JAX's backend"
)


def too_few_devices(what: str, wanted: int, have: int) -> str:
    """The message for a strategy that needs more devices than JAX has: how to get them."""
    return f"{what} needs {wanted} devices, but JAX has {have} devices. {HOW_TO_GET_DEVICES}"


def one_device_only(what: str) -> str:
    """The message for a strategy or fixture that could give only one device, unasked."""
    return (
        f"{what} would test on one device only: JAX has 1 device, and a test of sharding on one "
        f"device passes whatever the layout. {HOW_TO_GET_DEVICES}. To test on one device on purpose, "
        f"use meshes(max_size=1) or meshes(devices=[device]) (the host_devices fixture: --host-devices 1)"
    )


def _rebuildable(mesh: Mesh) -> bool:
    """Whether ``mesh_from_ids`` rebuilds ``mesh``: its devices are those ``jax.devices()`` has by
    their ids (not another backend's, whose ids may repeat the default backend's)."""
    by_id = {int(d.id): d for d in jax.devices()}
    return all(by_id.get(int(d.id)) is d for d in mesh.devices.flat)


_PRINTERS: list[bool] = []  # [whether Hypothesis prints meshes and shardings by device ids], once known


def _printed_by_ids() -> bool:
    """Have Hypothesis print every ``Mesh`` as ``show.mesh_text`` and every ``NamedSharding`` as
    ``show.sharding_text`` (``internals.print_in_examples``), once, when a strategy first draws one;
    False where Hypothesis's printer does not take them."""
    if not _PRINTERS:
        meshes_ok = internals.print_in_examples(Mesh, lambda obj, p, cycle: p.text(mesh_text(obj)))
        shardings_ok = internals.print_in_examples(
            NamedSharding, lambda obj, p, cycle: p.text(sharding_text(obj))
        )
        _PRINTERS.append(meshes_ok and shardings_ok)
    return _PRINTERS[0]


@st.composite
def shown(draw: st.DrawFn, obj: Any) -> Any:
    """``obj`` (a mesh or a ``NamedSharding``), drawn so that Hypothesis prints it by its device ids:
    ``mesh_from_ids([[3, 1], [0, 2]], ('data', 'model'))`` (``show.mesh_text``), where JAX's repr of
    a mesh has no device ids and most drawn meshes are shuffled subsets of the devices.

    Hypothesis's printer is given ``show``'s texts for meshes and shardings (``_printed_by_ids``).
    Where it does not take them, ``obj`` is drawn through ``st.builds`` instead: Hypothesis prints
    a built object as the call that made it, ``mesh_from_ids(...)``, where that is the shorter text
    (small meshes of ``Auto`` axes).  The call is made: JAX keeps one ``Mesh`` per layout, so it
    gives ``obj`` itself or one equal to it.  A mesh of devices ``jax.devices()`` does not have
    is drawn as it is.
    """
    if _printed_by_ids():
        return obj
    if isinstance(obj, NamedSharding):
        kwargs: dict[str, st.SearchStrategy[Any]] = {}
        if obj.memory_kind not in (None, "device"):  # as show.sharding_text: the device's own is the default
            kwargs["memory_kind"] = st.just(obj.memory_kind)
        return draw(st.builds(NamedSharding, shown(obj.mesh), st.just(obj.spec), **kwargs))
    if not isinstance(obj, Mesh) or not _rebuildable(obj):
        return obj
    types = tuple(getattr(obj, "axis_types", ()) or ())
    if not all(str(t).endswith("Auto") for t in types):
        kwargs = {"axis_types": st.just(types)}
    else:
        kwargs = {}
    return draw(st.builds(mesh_from_ids, st.just(mesh_ids(obj)), st.just(tuple(obj.axis_names)), **kwargs))


def shown_sharding(mesh: Mesh, spec: PartitionSpec) -> st.SearchStrategy[NamedSharding]:
    """``NamedSharding(mesh, spec)``, drawn through ``shown``: printed by its mesh's device ids."""
    return shown(NamedSharding(mesh, spec))


@st.composite
def _meshes(draw: st.DrawFn, **how: Any) -> Mesh:
    """A mesh of ``_mesh``, drawn through ``shown``: Hypothesis prints it by its device ids."""
    return draw(shown(draw(_mesh(**how))))


@st.composite
def _mesh(
    draw: st.DrawFn,
    *,
    devices: Sequence[jax.Device] | None,
    min_size: int,
    max_size: int | None,
    ndims: Sequence[int],
    min_axis_size: int = 1,
    data_one: bool = False,
    axis_names: tuple[str, ...] | None = None,
    with_axes: tuple[str, ...] | None = None,
    default_axes: tuple[str, str] = (FIRST_AXIS, OTHER_AXIS),
    one_device_asked: bool = False,
) -> Mesh:
    pool = list(jax.devices() if devices is None else devices)
    top = len(pool) if max_size is None else max_size
    if top > len(pool) or min_size > len(pool):
        raise InvalidArgument(
            too_few_devices(
                f"meshes(min_size={min_size}, max_size={max_size})", max(min_size, top), len(pool)
            )
        )
    if len(pool) == 1 and not one_device_asked:
        raise InvalidArgument(one_device_only("meshes()"))
    if min_axis_size == 1:
        size = draw(st.integers(min_size, top))
    else:
        sizes = [n for n in range(min_size, top + 1) if any(_shapes(n, k, min_axis_size) for k in ndims)]
        _check(bool(sizes), f"no mesh of {min_size} to {top} devices has axes of >= {min_axis_size} devices")
        size = draw(st.sampled_from(sizes))
    chosen = draw(st.permutations(pool))[:size]
    ids = [int(d.id) for d in chosen]
    ndim = draw(st.sampled_from(sorted(k for k in ndims if _shapes(size, k, min_axis_size))))
    if with_axes is not None:
        shape = draw(st.sampled_from(_shapes(size, ndim, min_axis_size)))
        others = _other_axes(with_axes, ndim - len(with_axes), default_axes)
        order = draw(st.permutations([*with_axes, *others]))
        return make_mesh(ids, shape, tuple(order))
    first, second = default_axes
    if axis_names is None and ndim == 1:
        return make_mesh(ids, (size,), (first,))
    if axis_names is None and ndim == 2:
        data = 1 if data_one else draw(st.sampled_from(_splits(size, min_axis_size)))
        if draw(st.booleans()):
            return make_mesh(ids, (data, size // data), (first, second))
        return make_mesh(ids, (size // data, data), (second, first))
    shape = draw(st.sampled_from(_shapes(size, ndim, min_axis_size)))
    names = axis_names or tuple(draw(st.permutations(_other_axes((), ndim, default_axes))))
    return make_mesh(ids, shape, names)


# ---------------------------------------------------------------------------
# Arrays of any rank, and their layouts


def partition_specs(
    mesh: Mesh | st.SearchStrategy[Mesh],
    ndim: int,
    *,
    shape: Sequence[int] | None = None,
    divisible: bool | None = True,
) -> st.SearchStrategy[PartitionSpec]:
    """Partition specs of ``ndim`` dimensions over ``mesh``'s axes.

    Each dimension gets ``None`` (replicated), one axis, or a tuple of axes;
    each axis is used once at most, and some may be left unused (the array
    is replicated over those).  Shrinks towards ``PartitionSpec()``, fully
    replicated.  With ``shape``, ``divisible=True`` keeps the specs whose
    axes divide their dimensions (a dimension split over axes of sizes 2
    and 4 needs a multiple of 8), ``False`` the ones where at least one
    dimension is not divided (JAX must refuse those), ``None`` any.

    ``mesh`` may be a strategy for meshes (``meshes()``): each spec is then
    over a mesh drawn for it, which the spec does not carry.  To have the
    mesh too, draw ``shardings(mesh=<that strategy>, ndim=ndim)``: a
    ``NamedSharding`` has both, as ``.mesh`` and ``.spec``.

    >>> mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    >>> partition_specs(mesh, 2).example()  # doctest: +SKIP
    PartitionSpec(None, 'x')
    >>> partition_specs(meshes(ndims=3), 2).example()  # doctest: +SKIP
    PartitionSpec(('axis2', 'data'), None)
    """
    _check(
        isinstance(mesh, (Mesh, st.SearchStrategy)),
        f"mesh={mesh!r} must be a jax.sharding.Mesh or a strategy for them",
    )
    _check(type(ndim) is int and ndim >= 0, f"ndim={ndim!r} must be an int >= 0")
    _check(divisible in (True, False, None), f"divisible={divisible!r} must be True, False or None")
    dims: tuple[int, ...] | None = None
    if shape is not None:
        dims = _shape_arg(shape)
        _check(len(dims) == ndim, f"shape={shape!r} has {len(dims)} dimensions, not ndim={ndim}")
    _check(divisible is not False or dims is not None, "divisible=False needs a shape")
    if isinstance(mesh, st.SearchStrategy):
        return _mesh_and_spec(meshes=mesh, ndim=ndim, dims=dims, divisible=divisible).map(lambda ms: ms[1])
    forced = _forced(mesh, ndim, dims) if divisible is False else ()
    if divisible is False:
        _check(
            bool(forced),
            f"every axis of the mesh {dict(mesh.shape)} divides every dimension of shape {dims}: "
            f"no spec leaves one undivided",
        )
    return _partition_specs(mesh=mesh, ndim=ndim, dims=dims, divisible=divisible, forced=forced)


def _forced(mesh: Mesh, ndim: int, dims: tuple[int, ...] | None) -> tuple[tuple[int, str], ...]:
    """The (dimension, axis) pairs where the axis does not divide the dimension."""
    assert dims is not None
    return tuple((d, a) for d in range(ndim) for a in mesh.axis_names if dims[d] % mesh.shape[a])


@st.composite
def _mesh_and_spec(
    draw: st.DrawFn,
    *,
    meshes: st.SearchStrategy[Mesh],
    ndim: int,
    dims: tuple[int, ...] | None,
    divisible: bool | None,
) -> tuple[Mesh, PartitionSpec]:
    """A mesh drawn from ``meshes`` and a spec over it (``partition_specs`` and ``shardings``
    given a strategy of meshes)."""
    mesh = _drawn_mesh(draw(meshes))
    forced = _forced(mesh, ndim, dims) if divisible is False else ()
    if divisible is False:
        assume(bool(forced))
    return mesh, draw(_partition_specs(mesh=mesh, ndim=ndim, dims=dims, divisible=divisible, forced=forced))


def _drawn_mesh(mesh: object) -> Mesh:
    if not isinstance(mesh, Mesh):
        raise InvalidArgument(f"the mesh strategy drew {mesh!r}, not a jax.sharding.Mesh")
    return mesh


@st.composite
def _partition_specs(
    draw: st.DrawFn,
    *,
    mesh: Mesh,
    ndim: int,
    dims: tuple[int, ...] | None,
    divisible: bool | None,
    forced: tuple[tuple[int, str], ...],
) -> PartitionSpec:
    free = list(mesh.axis_names)
    entries: list[list[str]] = [[] for _ in range(ndim)]
    if forced:
        d, axis = draw(st.sampled_from(forced))
        entries[d].append(axis)
        free.remove(axis)
    for d in range(ndim):
        chosen = draw(st.lists(st.sampled_from(free), unique=True, max_size=len(free))) if free else []
        if divisible and dims is not None:
            kept: list[str] = []
            for axis in chosen:  # the longest prefix whose axes divide the dimension
                if dims[d] % (math.prod(mesh.shape[a] for a in entries[d] + kept + [axis])):
                    break
                kept.append(axis)
            chosen = kept
        entries[d] += chosen
        free = [a for a in free if a not in chosen]
    return PartitionSpec(*(None if not e else e[0] if len(e) == 1 else tuple(e) for e in entries))


def spec_divides(spec: PartitionSpec, mesh: Mesh | AbstractMesh, shape: Sequence[int]) -> bool:
    """Whether ``spec`` over ``mesh`` splits every dimension of ``shape`` into equal parts.

    >>> spec_divides(PartitionSpec("x"), mesh, (6,))  # doctest: +SKIP
    True
    """
    for entry, size in zip(spec, shape, strict=False):
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        if size % math.prod(mesh.shape[a] for a in axes):
            return False
    return True


def _spec_axes(spec: object) -> tuple[str, ...]:
    """The axes a spec names, in order: each entry ``None``, an axis or a tuple of axes, each axis once."""
    _check(
        isinstance(spec, PartitionSpec),
        f"spec={spec!r} must be a jax.sharding.PartitionSpec (P('batch', None))",
    )
    assert isinstance(spec, PartitionSpec)
    names: list[str] = []
    for entry in spec:
        group = () if entry is None else (entry,) if isinstance(entry, str) else entry
        _check(
            isinstance(group, tuple) and all(isinstance(a, str) for a in group),
            f"spec={spec!r}: each entry must be None, an axis name or a tuple of axis names",
        )
        names += group
    _check(len(set(names)) == len(names), f"spec={spec!r} uses an axis more than once")
    return tuple(names)


def _split_by(spec: PartitionSpec, axis_sizes: dict[str, int], ndim: int) -> tuple[int, ...]:
    """How many parts ``spec`` splits each of ``ndim`` dimensions into, over axes of those sizes."""
    parts = []
    for d in range(ndim):
        entry = spec[d] if d < len(spec) else None
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        parts.append(math.prod(axis_sizes[a] for a in axes))
    return tuple(parts)


def _lacking(spec: PartitionSpec, axes: tuple[str, ...], mesh: Mesh) -> str:
    missing = [a for a in axes if a not in mesh.axis_names]
    return f"spec={spec!r} names axes {missing} that the mesh {dict(mesh.shape)} lacks"


def shardings(
    *,
    mesh: Mesh | st.SearchStrategy[Mesh] | None = None,
    ndim: int | None = None,
    shape: Sequence[int] | None = None,
    divisible: bool | None = True,
    spec: PartitionSpec | None = None,
) -> st.SearchStrategy[NamedSharding]:
    """``NamedSharding`` layouts for arrays of ``ndim`` dimensions (or of ``shape``).

    ``mesh`` is a mesh, a strategy for meshes, or ``None`` for ``meshes()``.
    Each sharding carries its mesh and spec (``.mesh``, ``.spec``).
    With ``shape``, ``divisible`` is as for ``partition_specs``: by default
    only layouts the shape divides, ``divisible=False`` only ones it does
    not (for testing that a function refuses them).

    With ``spec`` the spec is fixed (the layout a function asks for) and the
    mesh drawn: from ``mesh`` (a mesh, or a strategy), by default from
    ``meshes(with_axes=<the spec's axes>)``, meshes that have those axes and
    maybe others.  A spec naming an axis the mesh lacks is an
    ``InvalidArgument``.  ``ndim`` and ``shape`` are then optional (no fewer
    dimensions than the spec has); with ``shape``, ``divisible`` keeps the
    meshes that divide it, or not.

    Hypothesis prints a drawn sharding with its mesh's device ids:
    ``NamedSharding(mesh_from_ids([[3, 1], [0, 2]], ('data', 'model')), P('data', None))``.

    >>> shardings(shape=(8, 6), mesh=meshes(axis_names=("rows", "cols")))  # doctest: +ELLIPSIS
    ...
    >>> s = shardings(spec=P("batch", None)).example()  # doctest: +SKIP
    >>> s.spec, s.mesh.axis_names
    (PartitionSpec('batch', None), ('model', 'batch'))
    """
    dims = None if shape is None else _shape_arg(shape)
    _check(divisible in (True, False, None), f"divisible={divisible!r} must be True, False or None")
    if spec is not None:
        return _spec_shardings(spec=spec, mesh=mesh, ndim=ndim, dims=dims, divisible=divisible)
    _check(ndim is not None or dims is not None, "give shardings() an ndim, a shape or a spec")
    _check(
        ndim is None or (type(ndim) is int and ndim >= 0 and (dims is None or len(dims) == ndim)),
        f"ndim={ndim!r} must be an int >= 0 that agrees with shape={shape!r}",
    )
    _check(divisible is not False or dims is not None, "divisible=False needs a shape")
    rank = len(dims) if dims is not None else ndim
    assert rank is not None
    if isinstance(mesh, Mesh):
        specs = partition_specs(mesh, rank, shape=dims, divisible=divisible)
        return specs.flatmap(lambda spec: shown_sharding(mesh, spec))
    _check(mesh is None or isinstance(mesh, st.SearchStrategy), f"mesh={mesh!r} must be a Mesh or a strategy")
    drawn = (
        meshes(min_size=2) if mesh is None and divisible is False else mesh if mesh is not None else meshes()
    )
    pairs = _mesh_and_spec(meshes=drawn, ndim=rank, dims=dims, divisible=divisible)
    return pairs.flatmap(lambda ms: shown_sharding(*ms))


def _spec_shardings(
    *,
    spec: PartitionSpec,
    mesh: Mesh | st.SearchStrategy[Mesh] | None,
    ndim: int | None,
    dims: tuple[int, ...] | None,
    divisible: bool | None,
) -> st.SearchStrategy[NamedSharding]:
    """``shardings(spec=...)``: the spec fixed, the mesh given or drawn."""
    axes = _spec_axes(spec)
    _check(
        ndim is None or (type(ndim) is int and ndim >= len(spec) and (dims is None or len(dims) == ndim)),
        f"ndim={ndim!r} must be an int >= the {len(spec)} dimensions of spec={spec!r} "
        f"that agrees with the shape",
    )
    _check(
        dims is None or len(dims) >= len(spec),
        f"shape={dims!r} has fewer dimensions than spec={spec!r}",
    )
    _check(divisible is not False or dims is not None, "divisible=False needs a shape")
    if isinstance(mesh, Mesh):
        _check(set(axes) <= set(mesh.axis_names), _lacking(spec, axes, mesh))
        if dims is not None and divisible is not None:
            _check(
                spec_divides(spec, mesh, dims) == divisible,
                f"spec={spec!r} over the mesh {dict(mesh.shape)} "
                f"{'does not divide' if divisible else 'divides'} shape {dims} (divisible={divisible})",
            )
        return shown_sharding(mesh, spec)
    _check(mesh is None or isinstance(mesh, st.SearchStrategy), f"mesh={mesh!r} must be a Mesh or a strategy")
    drawn = mesh if mesh is not None else meshes(with_axes=axes) if axes else meshes()
    return _spec_over(meshes=drawn, spec=spec, axes=axes, dims=dims, divisible=divisible)


@st.composite
def _spec_over(
    draw: st.DrawFn,
    *,
    meshes: st.SearchStrategy[Mesh],
    spec: PartitionSpec,
    axes: tuple[str, ...],
    dims: tuple[int, ...] | None,
    divisible: bool | None,
) -> NamedSharding:
    mesh = _drawn_mesh(draw(meshes))
    if not set(axes) <= set(mesh.axis_names):
        raise InvalidArgument(f"{_lacking(spec, axes, mesh)}: draw meshes(with_axes={axes!r})")
    if dims is not None and divisible is not None:
        assume(spec_divides(spec, mesh, dims) == divisible)
    return draw(shown_sharding(mesh, spec))


_SIDE_MULTIPLES = 3  # by default a side is at most this many multiples above its smallest


def shapes(
    *,
    sharding: Sharding | None = None,
    spec: PartitionSpec | None = None,
    mesh: Mesh | None = None,
    ndim: int | None = None,
    min_side: int = 1,
    max_side: int | None = None,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes a layout splits into equal parts: every dimension a multiple of what it is split by.

    The layout is a ``sharding`` (a ``NamedSharding``, or any ``Sharding``
    given ``ndim``), or a ``spec`` over a ``mesh``: ``P("batch", None)`` over a
    mesh whose 'batch' axis has 4 devices gives shapes ``(4k, m)``.  The
    shapes have ``ndim`` dimensions (default: the spec's; more are not
    split).  Each side lies in ``[min_side, max_side]``; 0 only with
    ``min_side=0``; ``max_side`` defaults to three multiples above the
    smallest side.  Shrinks towards the smallest sides.  (To draw the
    sharding too, use ``sharded_arrays(sharding=<a strategy>)`` without a
    shape, or draw the sharding first with ``st.data()``.)

    >>> shapes(spec=P("batch", None), mesh=mesh, max_side=16).example()  # doctest: +SKIP
    (8, 3)
    >>> @given(cst.sharded_arrays(sharding=s, shape=cst.shapes(sharding=s)))  # doctest: +SKIP
    ... def test_mine(x): ...
    """
    _check(
        not isinstance(sharding, PartitionSpec),
        f"sharding={sharding!r} is a PartitionSpec: give it as spec= with a mesh=",
    )
    _check(
        not isinstance(sharding, st.SearchStrategy),
        f"sharding={sharding!r} must be a jax.sharding.Sharding, not a strategy (a drawn sharding is not "
        f"known here: sharded_arrays(sharding=<the strategy>) without a shape draws both)",
    )
    _check(ndim is None or (type(ndim) is int and ndim >= 0), f"ndim={ndim!r} must be an int >= 0")
    if sharding is not None:
        _check(isinstance(sharding, Sharding), f"sharding={sharding!r} must be a jax.sharding.Sharding")
        _check(spec is None and mesh is None, "give shapes() a sharding, or a spec and a mesh, not both")
        split = _sharding_splits(sharding, ndim)
    else:
        _check(
            spec is not None and mesh is not None,
            "give shapes() a sharding, or a spec and a mesh (a jax.sharding.Mesh)",
        )
        axes = _spec_axes(spec)
        assert spec is not None
        _check(
            isinstance(mesh, Mesh),
            f"mesh={mesh!r} must be a jax.sharding.Mesh (for drawn meshes: "
            f"sharded_arrays(sharding=shardings(spec=..., mesh=<a strategy>)) without a shape)",
        )
        assert isinstance(mesh, Mesh)
        _check(set(axes) <= set(mesh.axis_names), _lacking(spec, axes, mesh))
        _check(
            ndim is None or ndim >= len(spec),
            f"ndim={ndim!r} is fewer than the {len(spec)} dimensions of {spec}",
        )
        split = _split_by(spec, dict(mesh.shape), len(spec) if ndim is None else ndim)
    return _sides(split, min_side=min_side, max_side=max_side)


def _sharding_splits(sharding: Sharding, ndim: int | None) -> tuple[int, ...]:
    """How many parts ``sharding`` splits each dimension into."""
    if isinstance(sharding, NamedSharding):
        _spec_axes(sharding.spec)
        spec = sharding.spec
        _check(
            ndim is None or ndim >= len(spec),
            f"ndim={ndim!r} is fewer than the {len(spec)} dimensions of the sharding's spec {spec}",
        )
        return _split_by(spec, dict(sharding.mesh.shape), len(spec) if ndim is None else ndim)
    _check(
        ndim is not None,
        f"give shapes() an ndim for sharding={sharding!r} (only a NamedSharding has a spec)",
    )
    assert ndim is not None
    n = len(sharding.device_set)  # each dimension's parts divide the number of devices
    try:
        shard = sharding.shard_shape((n,) * ndim)
    except (ValueError, TypeError) as error:
        raise InvalidArgument(f"sharding={sharding!r} does not lay out {ndim} dimensions: {error}") from None
    return tuple(n // s for s in shard)


def _sides(
    split: tuple[int, ...], *, min_side: int, max_side: int | None, least: dict[int, int] | None = None
) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes whose dimension ``d`` is a multiple of ``split[d]`` in ``[min_side, max_side]``
    (and at least ``least[d]``, where given)."""
    _check(type(min_side) is int and min_side >= 0, f"min_side={min_side!r} must be an int >= 0")
    _check(
        max_side is None or (type(max_side) is int and max_side >= min_side),
        f"max_side={max_side!r} must be an int >= min_side={min_side}",
    )
    sides = []
    for d, parts in enumerate(split):
        smallest = max(min_side, (least or {}).get(d, 0))
        fewest = -(-smallest // parts)
        most = max(fewest, 1) + _SIDE_MULTIPLES if max_side is None else max_side // parts
        _check(
            fewest <= most,
            f"no multiple of {parts} (the parts dimension {d} is split into) lies in "
            f"[min_side={min_side}, max_side={max_side}]",
        )
        sides.append(st.integers(fewest, most).map(functools.partial(operator.mul, parts)))
    return st.tuples(*sides)


# Where an array of ``sharded_arrays`` lives: a NumPy array, on the default device
# uncommitted, committed to one device, or laid out by a sharding.
ARRAY_PLACEMENTS = ("numpy", "uncommitted", "device", "sharded")


def sharded_arrays(
    *,
    dtype: np.dtype | str | st.SearchStrategy[np.dtype | str] = "float32",
    shape: int | Sequence[int] | st.SearchStrategy[tuple[int, ...]] | None = None,
    sharding: Sharding | st.SearchStrategy[Sharding] | None = None,
    placements: Sequence[str] | None = None,
    min_value: float | None = None,
    max_value: float | None = None,
    allow_nan: bool | None = None,
    allow_infinity: bool | None = None,
    allow_subnormal: bool | None = None,
    elements: st.SearchStrategy[Any] | None = None,
    unique: bool = False,
    structure: str | Sequence[str] | None = None,
    axis: int | None = None,
) -> st.SearchStrategy[np.ndarray | jax.Array]:
    """Arrays of ``dtype`` and ``shape`` with ``values``' values, placed as a caller places them.

    ``dtype`` and ``shape`` may be strategies (``dtypes()``, ``shapes()``,
    ``hypothesis.extra.numpy.array_shapes()``).  ``placements`` picks some of
    ``ARRAY_PLACEMENTS``: ``"numpy"`` (a NumPy array), ``"uncommitted"``
    (``jax.device_put(a)``), ``"device"`` (committed to one drawn device),
    ``"sharded"`` (``jax.device_put(a, sharding)``).  Given a ``sharding``
    (or a strategy for them: ``shardings(spec=..., mesh=...)``) the arrays are
    laid out by it, and only so unless ``placements`` asks for others too;
    without one, every placement is drawn and the sharded ones get a layout of
    ``shardings(shape=...)``.  Given a sharding and no ``shape``, the shape
    is drawn for each drawn sharding so that it divides it (``shapes()``).
    A ``PartitionSpec`` is no sharding: it has no mesh (strategies have no
    mesh context), so ``sharding=shardings(spec=..., mesh=...)``.
    Each array is fresh: a function that donates or deletes it spoils nothing.

    ``min_value``, ``max_value``, ``allow_nan``, ``allow_infinity``,
    ``allow_subnormal``, ``elements`` and ``unique`` are ``values``' value
    controls (with a strategy for ``dtype``, checked against each dtype
    drawn; an ``allow_*=True`` a drawn dtype has nothing for is ignored there).
    A 64-bit dtype (float64, int64, uint64, complex128) while
    ``jax_enable_x64`` is off is an ``InvalidArgument`` when drawn: JAX
    would make it 32-bit.

    ``structure`` and ``axis`` are ``values``': every row along ``axis`` is
    drawn with a structure that breaks numerics.  Without a
    shape, the shapes drawn for the sharding have rows long enough for it; a
    shape strategy's shape whose rows are too short is skipped (``assume``),
    and a drawn dtype that has no structured values (not float16, bfloat16,
    float32 or float64) is an ``InvalidArgument`` when drawn.

    Hypothesis prints a ``jax.Array`` by its values only: each array placed
    by a sharding (or on one device) notes its layout with the mesh's device
    ids under the falsifying example, ``sharded_arrays drew a float32[8, 4]
    array laid out by NamedSharding(mesh_from_ids([[3, 1], [0, 2]], ('data',
    'model')), P('data', None))``.

    >>> sharded_arrays(shape=(4, 2), dtype="int8", placements=["numpy"]).example().shape
    (4, 2)
    >>> sharded_arrays(sharding=shardings(spec=P("batch")), dtype="bfloat16",
    ...                min_value=-1, max_value=1).example()  # doctest: +SKIP
    """
    if placements is None:
        placements = ("sharded",) if sharding is not None else ARRAY_PLACEMENTS
    kinds = tuple(placements) if not isinstance(placements, str) else ()
    _check(
        bool(kinds) and set(kinds) <= set(ARRAY_PLACEMENTS),
        f"placements={placements!r} must name some of {ARRAY_PLACEMENTS}",
    )
    _check(
        not isinstance(sharding, PartitionSpec),
        f"sharding={sharding!r} is a PartitionSpec, which has no mesh (a strategy has no mesh context): "
        f"use sharding=shardings(spec={sharding!r}, mesh=<a Mesh or a strategy of meshes>)",
    )
    _check(
        sharding is None or isinstance(sharding, (Sharding, st.SearchStrategy)),
        f"sharding={sharding!r} must be a jax.sharding.Sharding or a strategy for them",
    )
    _check(
        shape is not None or sharding is not None,
        "give sharded_arrays() a shape, or a sharding to draw shapes that divide it",
    )
    wanted = controls(
        min_value=min_value,
        max_value=max_value,
        allow_nan=allow_nan,
        allow_infinity=allow_infinity,
        allow_subnormal=allow_subnormal,
        elements=elements,
        unique=unique,
    )
    how = structure_arg(structure, axis, wanted)
    dims: tuple[int, ...] | None = None
    if shape is not None and not isinstance(shape, st.SearchStrategy):
        dims = _shape_arg(shape)
    if not isinstance(dtype, st.SearchStrategy):
        if how is not None:
            check_dtype(how, dtype_arg(dtype))
        # a dtype values() can draw under these controls, or InvalidArgument now
        _values(dtype_arg(dtype), 0 if dims is None or how is not None else math.prod(dims), wanted)
    if how is not None and dims is not None:
        check_shape(how, dims)
        if not isinstance(dtype, st.SearchStrategy):
            check_feasible(how, dtype_arg(dtype), wanted, dims[row_axis(how, dims)])
    dtypes_: st.SearchStrategy[np.dtype | str] = (
        dtype if isinstance(dtype, st.SearchStrategy) else st.just(dtype_arg(dtype))
    )
    sides: st.SearchStrategy[tuple[int, ...]] | None
    if shape is None:
        _check(
            not isinstance(sharding, Sharding) or isinstance(sharding, NamedSharding),
            f"sharded_arrays() without a shape draws shapes for a NamedSharding, "
            f"not {sharding!r}: give a shape",
        )
        sides = shapes(sharding=sharding) if isinstance(sharding, Sharding) else None
    else:
        sides = shape if isinstance(shape, st.SearchStrategy) else st.just(_shape_arg(shape))
    if isinstance(sharding, Sharding) and dims is not None:
        _check(
            _fits(sharding, dims),
            f"sharding={sharding!r} does not lay out shape {dims} in equal parts",
        )
    return _sharded_arrays(
        dtypes=dtypes_,
        shapes=sides,
        sharding=sharding,
        kinds=kinds,
        wanted=wanted,
        strict=not isinstance(dtype, st.SearchStrategy),
        how=how,
    )


def _fits(sharding: Sharding, dims: tuple[int, ...]) -> bool:
    try:
        sharding.shard_shape(dims)
    except (ValueError, TypeError):
        return False
    return True


@st.composite
def _sharded_arrays(
    draw: st.DrawFn,
    *,
    dtypes: st.SearchStrategy[np.dtype | str],
    shapes: st.SearchStrategy[tuple[int, ...]] | None,
    sharding: Sharding | st.SearchStrategy[Sharding] | None,
    kinds: tuple[str, ...],
    wanted: Controls = Controls(),
    strict: bool = True,
    how: Structure | None = None,
) -> np.ndarray | jax.Array:
    """The body of ``sharded_arrays``; ``shapes=None``: drawn for the drawn ``sharding``."""
    dtype = dtype_arg(draw(dtypes))
    if is_x64(dtype) and not x64_enabled():
        raise InvalidArgument(needs_x64("sharded_arrays()", dtype))
    if how is not None:
        check_dtype(how, dtype)
    layout: Sharding | st.SearchStrategy[Sharding] | None = sharding
    if shapes is None:
        assert sharding is not None
        layout = draw(sharding) if isinstance(sharding, st.SearchStrategy) else sharding
        if not isinstance(layout, Sharding):
            raise InvalidArgument(f"the sharding strategy drew {layout!r}, not a jax.sharding.Sharding")
        dims = draw(_shapes_of(layout, how))
    else:
        dims = _shape_arg(draw(shapes))
    if how is not None:
        assume(rows_fit(how, dims))  # a drawn shape with rows too short for the structure
        host = draw(structured(dtype=dtype, dims=dims, how=how, wanted=wanted))
    else:
        host = draw(_values(dtype, math.prod(dims), wanted, strict=strict).map(lambda a: a.reshape(dims)))
    kind = draw(st.sampled_from(kinds))
    if kind == "numpy":
        return host
    if kind == "uncommitted":
        return jax.device_put(host)
    if kind == "device":
        device = draw(st.sampled_from(jax.devices()))
        _note(f"sharded_arrays drew {_described(host)} committed to device {int(device.id)}")
        return jax.device_put(host, device)
    if layout is None:
        layout = shardings(shape=dims)
    if isinstance(layout, st.SearchStrategy):
        layout = draw(layout)
    if not _fits(layout, dims):
        raise InvalidArgument(f"the drawn sharding {layout!r} does not lay out shape {dims} in equal parts")
    _note(f"sharded_arrays drew {_described(host)} laid out by {sharding_text(layout)}")
    return jax.device_put(host, layout)


def _described(host: np.ndarray) -> str:
    return f"a {host.dtype.name}[{', '.join(map(str, host.shape))}] array"


def _note(text: str) -> None:
    """``hypothesis.note(text)``: printed under the falsifying example, where a ``jax.Array``
    shows its values but not its layout.  Outside a test (no build context) nothing."""
    if currently_in_test_context():
        note(text)


def _shapes_of(layout: Sharding, how: Structure | None = None) -> st.SearchStrategy[tuple[int, ...]]:
    """``shapes(sharding=layout)`` for a drawn layout; one that names no dimensions is refused clearly.
    With a structure, the rows along its axis are long enough for it."""
    if not isinstance(layout, NamedSharding):
        raise InvalidArgument(
            f"sharded_arrays() without a shape draws shapes for a NamedSharding, not {layout!r}: give a shape"
        )
    if how is None:
        return shapes(sharding=layout)
    split = _sharding_splits(layout, None)
    axis = row_axis(how, split, drawn=True)
    return _sides(split, min_side=1, max_side=None, least={axis: how.min_row})
