"""The bodies of the public strategies (``conformance.strategies``: read its docstring), and the
kit's own helpers beside them (``values_from``, ``OTHER_AXIS``, the device messages)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import ml_dtypes
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding

from conformance._src.contract.terms import DATA_AXIS, Contract, dtypes_in_domain
from conformance._src.inputs import coverage
from conformance._src.inputs.case import NUMPY_FORMS, TARGET, TILE, Case, MeshArg, Placement, make_mesh
from conformance._src.inputs.coverage import LONG_MAX, MEDIUM_MAX

OTHER_AXIS = "model"
MAX_LENGTH = LONG_MAX  # 2**20 + 7: past the thresholds where implementations change path
# Neighbours of the powers of two where chunked loops, tiles, donation and
# offloading thresholds sit (4096 elements, 8192, 1 MiB of float32, 65536, 2**20).
LONG_LENGTHS = tuple(n for k in (12, 13, 14, 16, 17, 18, 20) for n in (2**k - 1, 2**k, 2**k + 1))

# Lengths where implementations tend to break: empty, tiny, block boundaries
# of common vector widths and tile sizes, and primes (which only a data axis
# of size one divides).
BOUNDARY_LENGTHS = (
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    9,
    15,
    16,
    17,
    31,
    32,
    33,
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    257,
    511,
    512,
    513,
    1023,
    1024,
    1025,
    2047,
    2048,
    2049,
    *LONG_LENGTHS,
)
PRIME_LENGTHS = (
    2,
    3,
    5,
    7,
    11,
    13,
    17,
    19,
    23,
    29,
    31,
    37,
    61,
    97,
    101,
    127,
    131,
    257,
    509,
    521,
    1021,
    1031,
    2039,
    2053,
    2083,
)

# IEEE layouts (exponent bits, mantissa bits) of the float dtypes in the domain.
_FLOAT_FORMATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidArgument(message)


def lengths(
    *, data_size: int = 1, divisible: bool | None = True, max_length: int = MAX_LENGTH
) -> st.SearchStrategy[int]:
    """Vector lengths in ``[0, max_length]``.

    Biased towards boundary lengths, primes, multiples of ``data_size`` and
    their neighbours, and the upper half of the range.  ``divisible=True``
    keeps multiples of ``data_size`` only, ``False`` only non-multiples
    (needs ``data_size > 1``), ``None`` any length.
    """
    _check(isinstance(data_size, int) and data_size >= 1, f"data_size={data_size!r} must be an int >= 1")
    _check(
        isinstance(max_length, int) and max_length >= data_size,
        f"max_length={max_length!r} must be an int >= data_size={data_size}",
    )
    _check(
        divisible is not False or data_size > 1,
        "divisible=False needs data_size > 1: every length divides by 1",
    )
    near_multiple = st.builds(
        lambda k, d: max(0, min(max_length, k * data_size + d)),
        st.integers(0, max_length // data_size),
        st.sampled_from((0, -1, 1)),
    )
    raw = st.one_of(
        st.sampled_from([n for n in BOUNDARY_LENGTHS + PRIME_LENGTHS if n <= max_length]),
        near_multiple,
        st.integers(0, min(max_length, MEDIUM_MAX)),
        st.integers(
            min(max_length, MEDIUM_MAX), max_length
        ),  # long vectors: Hypothesis favours small integers
    )
    if divisible is None:
        return raw
    if divisible:
        return raw.map(lambda n: n - n % data_size)
    return raw.map(lambda n: n if n % data_size else (n + 1 if n < max_length else n - 1))


def special_floats(dtype: np.dtype | str) -> np.ndarray:
    """Values where doubling goes wrong, as an array of ``dtype``.

    Both zeros, both infinities, NaNs (quiet, negative, with a payload), the
    extremes, the largest value whose double is finite and the smallest whose
    double overflows, the smallest normal, subnormals (among them ones whose
    double is normal), and a few ordinary numbers.
    """
    dtype = np.dtype(dtype)
    _check(dtype.name in _FLOAT_FORMATS, f"special_floats needs a real float dtype, got {dtype}")
    exp_bits, man_bits = _FLOAT_FORMATS[dtype.name]
    inf = ((1 << exp_bits) - 1) << man_bits
    one = ((1 << (exp_bits - 1)) - 1) << man_bits
    magnitudes = [
        0,
        inf,
        inf | (1 << (man_bits - 1)),
        inf | 1,  # 0, inf, quiet NaN, NaN with payload
        inf - 1,  # largest finite
        inf - 1 - (1 << man_bits),  # largest whose double is finite
        ((1 << exp_bits) - 2) << man_bits,  # smallest whose double overflows
        1 << man_bits,  # smallest normal
        (1 << man_bits) - 1,  # largest subnormal
        1 << (man_bits - 1),  # a subnormal whose double is normal
        1,
        3,  # smallest subnormals
        one,
        one + (1 << (man_bits - 1)),
        one + 1,  # 1, 1.5, just above 1
    ]
    sign = 1 << (exp_bits + man_bits)
    bits = np.array(magnitudes + [m | sign for m in magnitudes], dtype=f"u{dtype.itemsize}")
    return bits.view(dtype)


def _float_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


_DRAWN_ELEMENTS = 16  # at most this many elements are drawn one by one, at drawn positions


def background(rng: np.random.Generator, dtype: np.dtype, length: int, edges: np.ndarray) -> np.ndarray:
    """``length`` integers of ``dtype``, a different value in (nearly) every position.

    Uniform over the dtype with ``edges`` mixed in at a quarter of the
    positions.  Past ``TILE`` elements a block of ``TILE`` (a prime) repeats,
    so a long vector costs little to make and its ``--case`` token stays short,
    and no power-of-two chunk of it looks like another.
    """
    block = min(length, TILE)
    info = np.iinfo(dtype)
    out = rng.integers(info.min, info.max, size=block, dtype=dtype, endpoint=True)
    mixed = rng.random(block) < 0.25
    out[mixed] = rng.choice(edges, size=int(mixed.sum()))
    return np.resize(out, length) if length > block else out


def _positions(length: int) -> st.SearchStrategy[int]:
    """Where drawn elements go: anywhere, or at the tail and next to powers of two."""
    marks = sorted({i for k in range(1, 21) for i in (2**k - 1, 2**k) if i < length} | {length - 1})
    return st.one_of(st.integers(0, length - 1), st.sampled_from(marks))


@st.composite
def _vectors(
    draw: st.DrawFn, *, dtype: np.dtype, length: int, edges: np.ndarray, elements: st.SearchStrategy[int]
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
        out = background(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), dtype, length, edges)
    else:
        out = np.full(length, draw(elements), dtype=dtype)
    for index, value in draw(st.lists(st.tuples(_positions(length), elements), max_size=_DRAWN_ELEMENTS)):
        out[index] = value
    return out


def _integer_edges(dtype: np.dtype) -> list[int]:
    info = np.iinfo(dtype)
    wanted = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2]
    wanted += [info.max // 2, info.max // 2 + 1, info.min // 2, info.min // 2 - 1]
    return sorted({int(e) for e in wanted if info.min <= e <= info.max})


def _as_bits(dtype: np.dtype) -> tuple[np.dtype, np.ndarray]:
    """The integer dtype values of ``dtype`` are drawn as, and its edge values in it.

    Floats are drawn as bit patterns (edges: ``special_floats``); integers as
    themselves (edges: the extremes, 0, 1, -1 and the halves).
    """
    if dtype.name in _FLOAT_FORMATS:
        return np.dtype(f"u{dtype.itemsize}"), special_floats(dtype).view(f"u{dtype.itemsize}")
    _check(dtype.kind in "iu", f"values() has no strategy for dtype {dtype}")
    return dtype, np.array(_integer_edges(dtype), dtype=dtype)


def values(
    *, dtype: np.dtype | str = "float32", length: int | None = None, shape: int | Sequence[int] | None = None
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` over the dtype's whole range: 1-D of ``length``, or of any ``shape``.

    Floats are drawn as bit patterns, so every exponent, both signs, NaN
    payloads and subnormals are as likely as ordinary numbers, mixed with
    ``special_floats``.  Integers cover the full range with the extremes.
    Complex numbers draw each component as their float type does.  Long
    arrays differ in every position, not only in a few (see ``_vectors``).
    Give ``length`` or ``shape``, not both.

    >>> values(dtype="int8", length=4).example().dtype
    dtype('int8')
    >>> values(dtype="bfloat16", shape=(2, 3)).example().shape
    (2, 3)
    """
    _check((length is None) != (shape is None), "give values() a length or a shape, not both nor neither")
    if shape is not None:
        dims = _shape_arg(shape)
        return values(dtype=dtype, length=math.prod(dims)).map(lambda a: a.reshape(dims))
    dtype = _dtype_arg(dtype)
    _check(isinstance(length, int) and length >= 0, f"length={length!r} must be an int >= 0")
    assert length is not None
    if dtype.kind == "c":
        part = _float_dtype(f"float{dtype.itemsize * 4}")
        return values(dtype=part, length=2 * length).map(lambda a: a.view(dtype))
    bits, edges = _as_bits(dtype)
    info = np.iinfo(bits)
    elements = st.one_of(st.sampled_from([int(e) for e in edges]), st.integers(int(info.min), int(info.max)))
    return _vectors(dtype=bits, length=length, edges=edges, elements=elements).map(lambda a: a.view(dtype))


def _dtype_arg(dtype: object) -> np.dtype:
    try:
        return np.dtype(jax.numpy.dtype(dtype))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise InvalidArgument(f"dtype={dtype!r} is not a dtype") from None


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
        return values_from(rng, _float_dtype(f"float{dtype.itemsize * 4}"), 2 * length).view(dtype)
    bits, edges = _as_bits(dtype)
    return background(rng, bits, length, edges).view(dtype)


def dtypes(
    *, contract: Contract | str = Contract.FULL, x64: bool | None = None
) -> st.SearchStrategy[np.dtype]:
    """The input dtypes in the contract's domain (float32 first, so it shrinks there)."""
    x64 = bool(jax.config.read("jax_enable_x64")) if x64 is None else x64
    return st.sampled_from(dtypes_in_domain(_contract(contract), x64=x64))


def _contract(contract: object) -> Contract:
    try:
        return Contract(contract)
    except ValueError:
        raise InvalidArgument(f"contract={contract!r} must be one of {[c.value for c in Contract]}") from None


def _divisors(n: int) -> list[int]:
    return [a for a in range(1, n + 1) if n % a == 0]


def meshes(
    *,
    devices: Sequence[jax.Device] | None = None,
    min_size: int = 1,
    max_size: int | None = None,
    ndims: Sequence[int] = (1, 2),
    min_axis_size: int = 1,
    kind: str | None = None,
    axis_names: Sequence[str] | None = None,
) -> st.SearchStrategy[Mesh]:
    """Meshes over any subset of ``devices`` (default: all), in any order, of any number of axes.

    Each mesh has one of ``ndims`` axes and between ``min_size`` and
    ``max_size`` devices, every axis at least ``min_axis_size`` of them,
    in any factorisation.  With ``axis_names`` every mesh has exactly those
    axes, in that order.  Without, 1-D meshes have the single axis 'data',
    2-D meshes 'data' and 'model' in either order, and meshes of more axes
    'data', 'model', 'axis2', ... in any order.
    ``kind`` (a mesh kind of ``coverage.MESHES`` but ``default``) picks the
    kit's mesh kinds: ``1d``, ``2d`` (both axes of 2+ devices) or
    ``2d-data1`` (the data axis has one device, the rest replicates).

    The devices are counted when drawing, so building a strategy never
    starts JAX's backend; too few of them is an ``InvalidArgument`` that
    says how to get more (``--host-devices``).  One device is too few unless
    the test asks for one-device meshes itself: ``max_size=1``, or
    ``devices=`` a list of one.

    >>> meshes(axis_names=("batch", "model"), min_axis_size=2)  # doctest: +ELLIPSIS
    ...
    """
    if kind is not None:
        _check(kind in ("1d", "2d", "2d-data1"), f"kind={kind!r} must be '1d', '2d' or '2d-data1'")
        _check(axis_names is None, "give meshes() a kind or axis_names, not both")
        ndims = (1,) if kind == "1d" else (2,)
        min_axis_size = 2 if kind == "2d" else 1
        min_size = max(min_size, coverage.MESH_DEVICES[kind])
    if axis_names is not None:
        names = tuple(axis_names) if not isinstance(axis_names, str) else ()
        _check(
            len(names) > 0 and all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names),
            f"axis_names={axis_names!r} must be a non-empty sequence of distinct non-empty strings",
        )
        _check(
            tuple(ndims) in ((1, 2), (len(names),)),
            f"ndims={ndims!r} disagrees with axis_names={axis_names!r}: give one of them",
        )
        ndims = (len(names),)
    # What can be checked without the devices is checked now; the device count when drawn.
    _check(
        isinstance(min_size, int)
        and 1 <= min_size
        and (max_size is None or (isinstance(max_size, int) and min_size <= max_size))
        and (devices is None or (max_size or min_size) <= len(devices)),
        f"need 1 <= min_size={min_size} <= max_size={max_size} <= the number of devices",
    )
    _check(
        len(ndims) > 0 and all(type(k) is int and k >= 1 for k in ndims),
        f"ndims={ndims!r} must be a non-empty sequence of ints >= 1",
    )
    _check(
        isinstance(min_axis_size, int) and min_axis_size >= 1,
        f"min_axis_size={min_axis_size!r} must be an int >= 1",
    )
    _check(
        max_size is None
        or any(_shapes(n, k, min_axis_size) for n in range(min_size, max_size + 1) for k in ndims),
        f"no mesh of {min_size} to {max_size} devices has {' or '.join(map(str, ndims))} axes "
        f"of >= {min_axis_size} devices each",
    )
    return _meshes(
        devices=devices,
        min_size=min_size,
        max_size=max_size,
        ndims=tuple(ndims),
        min_axis_size=min_axis_size,
        data_one=kind == "2d-data1",
        axis_names=None if axis_names is None else tuple(axis_names),
        one_device_asked=devices is not None or max_size == 1,
    )


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


@st.composite
def _meshes(
    draw: st.DrawFn,
    *,
    devices: Sequence[jax.Device] | None,
    min_size: int,
    max_size: int | None,
    ndims: Sequence[int],
    min_axis_size: int = 1,
    data_one: bool = False,
    axis_names: tuple[str, ...] | None = None,
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
    if axis_names is None and ndim == 1:
        return make_mesh(ids, (size,), (DATA_AXIS,))
    if axis_names is None and ndim == 2:
        data = 1 if data_one else draw(st.sampled_from(_splits(size, min_axis_size)))
        if draw(st.booleans()):
            return make_mesh(ids, (data, size // data), (DATA_AXIS, OTHER_AXIS))
        return make_mesh(ids, (size // data, data), (OTHER_AXIS, DATA_AXIS))
    shape = draw(st.sampled_from(_shapes(size, ndim, min_axis_size)))
    names = axis_names or tuple(
        draw(st.permutations([DATA_AXIS, OTHER_AXIS, *(f"axis{k}" for k in range(2, ndim))]))
    )
    return make_mesh(ids, shape, names)


def placements(
    *,
    length: int,
    devices: Sequence[jax.Device] | None = None,
    kinds: Sequence[str] | None = None,
    target: bool = True,
) -> st.SearchStrategy[Placement]:
    """Where the input lives (``coverage.PLACEMENTS``): NumPy (plain, or a strided or
    reversed view, non-native byte order, read-only), uncommitted, one device,
    sharded elsewhere, or already in the target layout.

    Sharded placements use a number of devices that divides ``length``.
    ``kinds`` keeps some of them; ``target=False`` leaves out the target
    layout (there is none for a length the data axis does not divide).

    >>> placements(length=8, kinds=["numpy-view"]).example()[0]
    'numpy'
    """
    _check(isinstance(length, int) and length >= 0, f"length={length!r} must be an int >= 0")
    _check(devices is None or len(devices) >= 1, "placements needs at least one device")
    chosen = [k for k in (kinds or coverage.PLACEMENTS) if target or k != "target"]
    _check(
        bool(chosen) and set(chosen) <= set(coverage.PLACEMENTS),
        f"kinds={kinds!r} must name some of {coverage.PLACEMENTS}",
    )
    return _placements(length=length, devices=devices, kinds=tuple(chosen))


@st.composite
def _placements(
    draw: st.DrawFn, *, length: int, devices: Sequence[jax.Device] | None, kinds: tuple[str, ...]
) -> Placement:
    pool = list(jax.devices() if devices is None else devices)
    kind = draw(st.sampled_from(kinds))
    if kind in ("uncommitted", "numpy"):
        return (kind,)
    if kind == "numpy-view":
        return ("numpy", draw(st.sampled_from(NUMPY_FORMS)))
    if kind == "target":
        return TARGET
    if kind == "device":
        return ("device", int(draw(st.sampled_from(pool)).id))
    ids = [int(d.id) for d in draw(st.permutations(pool))]
    sizes = [k for k in range(1, len(pool) + 1) if length % k == 0]
    size = draw(st.sampled_from(sizes))
    how = draw(st.sampled_from(["split", "replicated"]))
    return ("sharded", tuple(ids[:size]), how)


def cases(
    *,
    contract: Contract | str = Contract.FULL,
    dtypes_from: Sequence[np.dtype | str] | None = None,
    mesh_args: Sequence[MeshArg] | None = None,
    divisible: bool = True,
    any_placement: bool = False,
    max_length: int = MAX_LENGTH,
    min_data_size: int = 1,
    mesh_kinds: Sequence[str] | None = None,
    placement_kinds: Sequence[str] | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> st.SearchStrategy[Case]:
    """A whole example: values, mesh, how the mesh is passed, input placement.

    The seed contract only ever calls ``pjit_double(x)`` with float32; the
    full one draws every dtype and passes ``mesh`` (omitted, ``None`` or a
    mesh).  ``divisible=False`` draws lengths the data axis does not divide
    (so ``mesh`` is always a mesh whose data axis has at least 2 devices).
    ``mesh_kinds`` and ``placement_kinds`` keep some kinds of the coverage
    axes (``coverage.MESHES``, ``coverage.PLACEMENTS``; the latter implies
    ``any_placement``): ``cases(dtypes_from=["int8"], mesh_kinds=["2d"],
    placement_kinds=["numpy-view"])`` draws one cell, of any length.
    ``devices`` are those meshes and placements use (default: all, and more
    than one when a mesh is drawn: see ``meshes``).
    """
    contract = _contract(contract)
    _check(isinstance(max_length, int) and max_length >= 0, f"max_length={max_length!r} must be an int >= 0")
    _check(
        mesh_kinds is None or (bool(mesh_kinds) and set(mesh_kinds) <= set(coverage.MESHES)),
        f"mesh_kinds={mesh_kinds!r} must name some of {coverage.MESHES}",
    )
    _check(
        mesh_args is None or (bool(mesh_args) and set(mesh_args) <= {"omit", "none", "mesh"}),
        f"mesh_args={mesh_args!r} must name some of ('omit', 'none', 'mesh')",
    )
    if dtypes_from is not None:
        _check(bool(dtypes_from), "dtypes_from must name at least one dtype")
        for d in dtypes_from:
            _dtype_arg(d)
    if placement_kinds is not None:
        placements(length=0, kinds=placement_kinds)  # validates the kinds
    return _cases(
        contract=contract,
        dtypes_from=dtypes_from,
        mesh_args=mesh_args,
        divisible=divisible,
        any_placement=any_placement,
        max_length=max_length,
        min_data_size=min_data_size,
        mesh_kinds=mesh_kinds,
        placement_kinds=placement_kinds,
        devices=None if devices is None else tuple(devices),
    )


@st.composite
def _cases(
    draw: st.DrawFn,
    *,
    contract: Contract,
    dtypes_from: Sequence[np.dtype | str] | None = None,
    mesh_args: Sequence[MeshArg] | None = None,
    divisible: bool = True,
    any_placement: bool = False,
    max_length: int = MAX_LENGTH,
    min_data_size: int = 1,
    mesh_kinds: Sequence[str] | None = None,
    placement_kinds: Sequence[str] | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> Case:
    """The body of ``cases``, its arguments checked."""
    if dtypes_from is not None:
        dtype = draw(st.sampled_from([np.dtype(d) for d in dtypes_from]))
    else:
        dtype = draw(dtypes(contract=contract))
    allowed: Sequence[MeshArg] = (
        mesh_args
        if mesh_args is not None
        else (("omit",) if contract is Contract.SEED else ("mesh", "none", "omit"))
    )
    if mesh_kinds is not None:
        kind = draw(st.sampled_from(list(mesh_kinds)))
        allowed = [a for a in allowed if (a == "mesh") == (kind != "default")] or ["mesh"]
    mesh_arg: MeshArg = "mesh" if not divisible else draw(st.sampled_from(list(allowed)))
    mesh = None
    data_size = 1
    if mesh_arg == "mesh":
        mesh = draw(meshes(kind=kind, devices=devices) if mesh_kinds is not None else meshes(devices=devices))
        data_size = int(mesh.shape[DATA_AXIS])
        if not divisible and data_size < max(2, min_data_size):
            mesh = draw(meshes(min_size=2, ndims=(1,), devices=devices))
            data_size = int(mesh.shape[DATA_AXIS])
    n = draw(lengths(data_size=data_size, divisible=divisible, max_length=max(max_length, data_size + 1)))
    vals = draw(values(dtype=dtype, length=n))
    placement: Placement = ("uncommitted",)
    if any_placement or placement_kinds is not None:
        placement = draw(placements(length=n, devices=devices, kinds=placement_kinds, target=divisible))
    return Case(vals, mesh, mesh_arg, placement)


# ---------------------------------------------------------------------------
# Arrays of any rank, and their layouts


def partition_specs(
    mesh: Mesh, ndim: int, *, shape: Sequence[int] | None = None, divisible: bool | None = True
) -> st.SearchStrategy[PartitionSpec]:
    """Partition specs of ``ndim`` dimensions over ``mesh``'s axes.

    Each dimension gets ``None`` (replicated), one axis, or a tuple of axes;
    each axis is used once at most, and some may be left unused (the array
    is replicated over those).  Shrinks towards ``PartitionSpec()``, fully
    replicated.  With ``shape``, ``divisible=True`` keeps the specs whose
    axes divide their dimensions (a dimension split over axes of sizes 2
    and 4 needs a multiple of 8), ``False`` the ones where at least one
    dimension is not divided (JAX must refuse those), ``None`` any.

    >>> mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    >>> partition_specs(mesh, 2).example()  # doctest: +SKIP
    PartitionSpec(None, 'x')
    """
    _check(isinstance(mesh, Mesh), f"mesh={mesh!r} must be a jax.sharding.Mesh")
    _check(type(ndim) is int and ndim >= 0, f"ndim={ndim!r} must be an int >= 0")
    _check(divisible in (True, False, None), f"divisible={divisible!r} must be True, False or None")
    dims: tuple[int, ...] | None = None
    if shape is not None:
        dims = _shape_arg(shape)
        _check(len(dims) == ndim, f"shape={shape!r} has {len(dims)} dimensions, not ndim={ndim}")
    _check(divisible is not False or dims is not None, "divisible=False needs a shape")
    forced: list[tuple[int, str]] = []
    if divisible is False:
        assert dims is not None
        forced = [(d, a) for d in range(ndim) for a in mesh.axis_names if dims[d] % mesh.shape[a]]
        _check(
            bool(forced),
            f"every axis of the mesh {dict(mesh.shape)} divides every dimension of shape {dims}: "
            f"no spec leaves one undivided",
        )
    return _partition_specs(mesh=mesh, ndim=ndim, dims=dims, divisible=divisible, forced=tuple(forced))


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


def spec_divides(spec: PartitionSpec, mesh: Mesh, shape: Sequence[int]) -> bool:
    """Whether ``spec`` over ``mesh`` splits every dimension of ``shape`` into equal parts."""
    for entry, size in zip(spec, shape, strict=False):
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        if size % math.prod(mesh.shape[a] for a in axes):
            return False
    return True


def shardings(
    *,
    mesh: Mesh | st.SearchStrategy[Mesh] | None = None,
    ndim: int | None = None,
    shape: Sequence[int] | None = None,
    divisible: bool | None = True,
) -> st.SearchStrategy[NamedSharding]:
    """``NamedSharding`` layouts for arrays of ``ndim`` dimensions (or of ``shape``).

    ``mesh`` is a mesh, a strategy for meshes, or ``None`` for ``meshes()``.
    With ``shape``, ``divisible`` is as for ``partition_specs``: by default
    only layouts the shape divides, ``divisible=False`` only ones it does
    not (for testing that a function refuses them).

    >>> shardings(shape=(8, 6), mesh=meshes(axis_names=("rows", "cols")))  # doctest: +ELLIPSIS
    ...
    """
    dims = None if shape is None else _shape_arg(shape)
    _check(ndim is not None or dims is not None, "give shardings() an ndim or a shape")
    _check(
        ndim is None or (type(ndim) is int and ndim >= 0 and (dims is None or len(dims) == ndim)),
        f"ndim={ndim!r} must be an int >= 0 that agrees with shape={shape!r}",
    )
    _check(divisible is not False or dims is not None, "divisible=False needs a shape")
    rank = len(dims) if dims is not None else ndim
    assert rank is not None
    if isinstance(mesh, Mesh):
        specs = partition_specs(mesh, rank, shape=dims, divisible=divisible)
        return specs.map(lambda spec: NamedSharding(mesh, spec))
    _check(mesh is None or isinstance(mesh, st.SearchStrategy), f"mesh={mesh!r} must be a Mesh or a strategy")
    drawn = (
        meshes(min_size=2) if mesh is None and divisible is False else mesh if mesh is not None else meshes()
    )
    return _shardings(meshes=drawn, rank=rank, dims=dims, divisible=divisible)


@st.composite
def _shardings(
    draw: st.DrawFn,
    *,
    meshes: st.SearchStrategy[Mesh],
    rank: int,
    dims: tuple[int, ...] | None,
    divisible: bool | None,
) -> NamedSharding:
    mesh = draw(meshes)
    if divisible is False:
        assert dims is not None
        assume(any(dims[d] % mesh.shape[a] for d in range(rank) for a in mesh.axis_names))
    return NamedSharding(mesh, draw(partition_specs(mesh, rank, shape=dims, divisible=divisible)))


# Where an array of ``sharded_arrays`` lives: a NumPy array, on the default device
# uncommitted, committed to one device, or laid out by a sharding.
ARRAY_PLACEMENTS = ("numpy", "uncommitted", "device", "sharded")


def sharded_arrays(
    *,
    dtype: np.dtype | str | st.SearchStrategy[np.dtype | str] = "float32",
    shape: int | Sequence[int] | st.SearchStrategy[tuple[int, ...]],
    sharding: Sharding | st.SearchStrategy[Sharding] | None = None,
    placements: Sequence[str] | None = None,
) -> st.SearchStrategy[np.ndarray | jax.Array]:
    """Arrays of ``dtype`` and ``shape`` with ``values``' values, placed as a caller places them.

    ``dtype`` and ``shape`` may be strategies (``dtypes()``,
    ``hypothesis.extra.numpy.array_shapes()``).  ``placements`` picks some of
    ``ARRAY_PLACEMENTS``: ``"numpy"`` (a NumPy array), ``"uncommitted"``
    (``jax.device_put(a)``), ``"device"`` (committed to one drawn device),
    ``"sharded"`` (``jax.device_put(a, sharding)``).  Given a ``sharding``
    (or a strategy for them) the arrays are laid out by it, and only so
    unless ``placements`` asks for others too; without one, every placement
    is drawn and the sharded ones get a layout of ``shardings(shape=...)``.
    Each array is fresh: a function that donates or deletes it spoils nothing.

    >>> sharded_arrays(shape=(4, 2), dtype="int8", placements=["numpy"]).example().shape
    (4, 2)
    """
    if placements is None:
        placements = ("sharded",) if sharding is not None else ARRAY_PLACEMENTS
    kinds = tuple(placements) if not isinstance(placements, str) else ()
    _check(
        bool(kinds) and set(kinds) <= set(ARRAY_PLACEMENTS),
        f"placements={placements!r} must name some of {ARRAY_PLACEMENTS}",
    )
    _check(
        sharding is None or isinstance(sharding, (Sharding, st.SearchStrategy)),
        f"sharding={sharding!r} must be a jax.sharding.Sharding or a strategy for them",
    )
    if not isinstance(dtype, st.SearchStrategy):
        values(dtype=dtype, length=0)  # a dtype values() can draw, or InvalidArgument now
    dtypes_: st.SearchStrategy[np.dtype | str] = (
        dtype if isinstance(dtype, st.SearchStrategy) else st.just(_dtype_arg(dtype))
    )
    shapes: st.SearchStrategy[tuple[int, ...]] = (
        shape if isinstance(shape, st.SearchStrategy) else st.just(_shape_arg(shape))
    )
    if isinstance(sharding, Sharding) and not isinstance(shape, st.SearchStrategy):
        dims = _shape_arg(shape)
        _check(
            _fits(sharding, dims),
            f"sharding={sharding!r} does not lay out shape {dims} in equal parts",
        )
    return _sharded_arrays(dtypes=dtypes_, shapes=shapes, sharding=sharding, kinds=kinds)


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
    shapes: st.SearchStrategy[tuple[int, ...]],
    sharding: Sharding | st.SearchStrategy[Sharding] | None,
    kinds: tuple[str, ...],
) -> np.ndarray | jax.Array:
    dtype, dims = _dtype_arg(draw(dtypes)), _shape_arg(draw(shapes))
    host = draw(values(dtype=dtype, shape=dims))
    kind = draw(st.sampled_from(kinds))
    if kind == "numpy":
        return host
    if kind == "uncommitted":
        return jax.device_put(host)
    if kind == "device":
        return jax.device_put(host, draw(st.sampled_from(jax.devices())))
    layout = sharding
    if layout is None:
        layout = shardings(shape=dims)
    if isinstance(layout, st.SearchStrategy):
        layout = draw(layout)
    if not _fits(layout, dims):
        raise InvalidArgument(f"the drawn sharding {layout!r} does not lay out shape {dims} in equal parts")
    return jax.device_put(host, layout)
