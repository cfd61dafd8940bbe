"""Hypothesis strategies for testing ``pjit_double``-like functions.

Public and importable for your own property tests::

    from hypothesis import given
    from conformance import strategies as cst

    @given(cst.cases(contract="full"))
    def test_mine(case): ...

Every strategy is a small keyword-argument function that checks its
arguments when called.  Meshes and cases read ``jax.devices()`` when drawn,
not when built, so building a strategy never starts JAX's backend.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from jax.sharding import Mesh

from conformance.case import Case, MeshArg, Placement, make_mesh
from conformance.contract import DATA_AXIS, Contract, dtypes_in_domain

OTHER_AXIS = "model"
MAX_LENGTH = 2100  # past the 2048 block boundary, with room for its neighbours

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
        st.integers(0, max_length),
        st.integers(max_length // 2, max_length),  # long vectors: Hypothesis favours small integers
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


@st.composite
def _vectors(
    draw: st.DrawFn, *, dtype: np.dtype, length: int, edges: np.ndarray, elements: st.SearchStrategy[int]
) -> np.ndarray:
    """``length`` integers of ``dtype``: a background and a few elements drawn where Hypothesis likes.

    The background is one drawn element repeated or, as often, a different
    value in every position: uniform over the dtype with ``edges`` mixed in
    at a quarter of the positions, from a generator Hypothesis seeds.  So a
    long vector is not mostly one number (what ``hnp.arrays`` gives: it draws
    a few elements and fills the rest with one value), a defect at any
    position shows, and Hypothesis makes a few dozen choices however long the
    vector is.  It shrinks to a constant background with a few elements.
    """
    if length == 0:
        return np.zeros(0, dtype)
    if draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        info = np.iinfo(dtype)
        out = rng.integers(info.min, info.max, size=length, dtype=dtype, endpoint=True)
        mixed = rng.random(length) < 0.25
        out[mixed] = rng.choice(edges, size=int(mixed.sum()))
    else:
        out = np.full(length, draw(elements), dtype=dtype)
    for index, value in draw(
        st.lists(st.tuples(st.integers(0, length - 1), elements), max_size=_DRAWN_ELEMENTS)
    ):
        out[index] = value
    return out


def values(*, dtype: np.dtype | str = "float32", length: int) -> st.SearchStrategy[np.ndarray]:
    """1-D arrays of ``dtype`` over the dtype's whole range.

    Floats are drawn as bit patterns, so every exponent, both signs, NaN
    payloads and subnormals are as likely as ordinary numbers, mixed with
    ``special_floats``.  Integers cover the full range with the extremes.
    Complex numbers draw each component as their float type does.  Long
    vectors differ in every position, not only in a few (see ``_vectors``).
    """
    dtype = np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
    _check(isinstance(length, int) and length >= 0, f"length={length!r} must be an int >= 0")
    if dtype.kind == "c":
        part = _float_dtype(f"float{dtype.itemsize * 4}")
        return values(dtype=part, length=2 * length).map(lambda a: a.view(dtype))
    if dtype.name in _FLOAT_FORMATS:
        bits = np.dtype(f"u{dtype.itemsize}")
        specials = special_floats(dtype).view(bits)
        elements = st.one_of(
            st.sampled_from([int(b) for b in specials]), st.integers(0, int(np.iinfo(bits).max))
        )
        return _vectors(dtype=bits, length=length, edges=specials, elements=elements).map(
            lambda a: a.view(dtype)
        )
    _check(dtype.kind in "iu", f"values() has no strategy for dtype {dtype}")
    info = np.iinfo(dtype)
    edges = sorted(
        {
            e
            for e in [
                info.min,
                info.max,
                0,
                1,
                -1 if info.min < 0 else 2,
                info.max // 2,
                info.max // 2 + 1,
                info.min // 2,
                info.min // 2 - 1,
            ]
            if info.min <= e <= info.max
        }
    )
    return _vectors(
        dtype=dtype,
        length=length,
        edges=np.array(edges, dtype=dtype),
        elements=st.one_of(st.sampled_from(edges), st.integers(int(info.min), int(info.max))),
    )


def dtypes(
    *, contract: Contract | str = Contract.FULL, x64: bool | None = None
) -> st.SearchStrategy[np.dtype]:
    """The input dtypes in the contract's domain (float32 first, so it shrinks there)."""
    x64 = bool(jax.config.read("jax_enable_x64")) if x64 is None else x64
    return st.sampled_from(dtypes_in_domain(Contract(contract), x64=x64))


def _divisors(n: int) -> list[int]:
    return [a for a in range(1, n + 1) if n % a == 0]


def meshes(
    *,
    devices: Sequence[jax.Device] | None = None,
    min_size: int = 1,
    max_size: int | None = None,
    ndims: Sequence[int] = (1, 2),
    min_axis_size: int = 1,
) -> st.SearchStrategy[Mesh]:
    """Meshes over any subset of ``devices`` (default: all), in any order.

    1-D meshes have the single axis 'data'; 2-D meshes have 'data' and
    'model' in either order, with any factorisation of the size.
    ``min_axis_size=2`` (with ``ndims=(2,)``) keeps the 2-D meshes where
    neither axis is trivial: the data axis is a strict part of the mesh.
    """
    # What can be checked without the devices is checked now; the device count when drawn.
    _check(
        isinstance(min_size, int)
        and 1 <= min_size
        and (max_size is None or (isinstance(max_size, int) and min_size <= max_size))
        and (devices is None or (max_size or min_size) <= len(devices)),
        f"need 1 <= min_size={min_size} <= max_size={max_size} <= the number of devices",
    )
    _check(len(ndims) > 0 and set(ndims) <= {1, 2}, f"ndims={ndims!r} must be drawn from (1, 2)")
    _check(
        isinstance(min_axis_size, int)
        and min_axis_size >= 1
        and (min_axis_size == 1 or tuple(ndims) == (2,)),
        f"min_axis_size={min_axis_size!r} must be an int >= 1, and above 1 only with ndims=(2,)",
    )
    return _meshes(
        devices=devices, min_size=min_size, max_size=max_size, ndims=tuple(ndims), min_axis_size=min_axis_size
    )


def _splits(size: int, min_axis_size: int) -> list[int]:
    """Sizes of the data axis of a 2-D mesh of ``size`` devices, both axes >= min_axis_size."""
    return [a for a in _divisors(size) if a >= min_axis_size and size // a >= min_axis_size]


@st.composite
def _meshes(
    draw: st.DrawFn,
    *,
    devices: Sequence[jax.Device] | None,
    min_size: int,
    max_size: int | None,
    ndims: Sequence[int],
    min_axis_size: int = 1,
) -> Mesh:
    pool = list(jax.devices() if devices is None else devices)
    top = len(pool) if max_size is None else max_size
    _check(
        1 <= min_size <= top <= len(pool),
        f"need 1 <= min_size={min_size} <= max_size={top} <= {len(pool)} devices",
    )
    if min_axis_size == 1:
        size = draw(st.integers(min_size, top))
    else:
        sizes = [n for n in range(min_size, top + 1) if _splits(n, min_axis_size)]
        _check(bool(sizes), f"no mesh of {min_size} to {top} devices has two axes of >= {min_axis_size}")
        size = draw(st.sampled_from(sizes))
    chosen = draw(st.permutations(pool))[:size]
    ids = [int(d.id) for d in chosen]
    if draw(st.sampled_from(sorted(ndims))) == 1:
        return make_mesh(ids, (size,), (DATA_AXIS,))
    data = draw(st.sampled_from(_splits(size, min_axis_size)))
    if draw(st.booleans()):
        return make_mesh(ids, (data, size // data), (DATA_AXIS, OTHER_AXIS))
    return make_mesh(ids, (size // data, data), (OTHER_AXIS, DATA_AXIS))


def placements(*, length: int, devices: Sequence[jax.Device] | None = None) -> st.SearchStrategy[Placement]:
    """Where the input lives: uncommitted, NumPy, one device, or sharded.

    Sharded placements use a number of devices that divides ``length``.
    """
    _check(isinstance(length, int) and length >= 0, f"length={length!r} must be an int >= 0")
    _check(devices is None or len(devices) >= 1, "placements needs at least one device")
    return _placements(length=length, devices=devices)


@st.composite
def _placements(draw: st.DrawFn, *, length: int, devices: Sequence[jax.Device] | None) -> Placement:
    pool = list(jax.devices() if devices is None else devices)
    kind = draw(st.sampled_from(["uncommitted", "numpy", "device", "sharded"]))
    if kind in ("uncommitted", "numpy"):
        return (kind,)
    if kind == "device":
        return ("device", int(draw(st.sampled_from(pool)).id))
    ids = [int(d.id) for d in draw(st.permutations(pool))]
    sizes = [k for k in range(1, len(pool) + 1) if length % k == 0]
    size = draw(st.sampled_from(sizes))
    how = draw(st.sampled_from(["split", "replicated"]))
    return ("sharded", tuple(ids[:size]), how)


@st.composite
def cases(
    draw: st.DrawFn,
    *,
    contract: Contract | str = Contract.FULL,
    dtypes_from: Sequence[np.dtype | str] | None = None,
    mesh_args: Sequence[MeshArg] | None = None,
    divisible: bool = True,
    any_placement: bool = False,
    max_length: int = MAX_LENGTH,
    min_data_size: int = 1,
) -> Case:
    """A whole example: values, mesh, how the mesh is passed, input placement.

    The seed contract only ever calls ``pjit_double(x)`` with float32; the
    full one draws every dtype and passes ``mesh`` (omitted, ``None`` or a
    mesh).  ``divisible=False`` draws lengths the data axis does not divide
    (so ``mesh`` is always a mesh whose data axis has at least 2 devices).
    """
    contract = Contract(contract)
    if dtypes_from is not None:
        dtype = draw(st.sampled_from([np.dtype(d) for d in dtypes_from]))
    else:
        dtype = draw(dtypes(contract=contract))
    allowed: Sequence[MeshArg] = (
        mesh_args
        if mesh_args is not None
        else (("omit",) if contract is Contract.SEED else ("mesh", "none", "omit"))
    )
    mesh_arg: MeshArg = "mesh" if not divisible else draw(st.sampled_from(list(allowed)))
    mesh = None
    data_size = 1
    if mesh_arg == "mesh":
        mesh = draw(meshes())
        data_size = int(mesh.shape[DATA_AXIS])
        if not divisible and data_size < max(2, min_data_size):
            mesh = draw(meshes(min_size=2, ndims=(1,)))
            data_size = int(mesh.shape[DATA_AXIS])
    n = draw(lengths(data_size=data_size, divisible=divisible, max_length=max_length))
    vals = draw(values(dtype=dtype, length=n))
    placement: Placement = draw(placements(length=n)) if any_placement else ("uncommitted",)
    return Case(vals, mesh, mesh_arg, placement)
