"""The strategies of the ``pjit_double`` contract, public in ``conformance.strategies``: vector
``lengths``, input ``placements``, whole ``cases``, and ``dtypes`` with ``contract=`` (the
contract's dtype domain; otherwise the library's ``dtypes``).

They build on the library's general strategies (``library/strategies.py``, ``library/dtypes.py``),
which know no contract: the meshes drawn here get the contract's axis names (``meshes``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from jax.sharding import Mesh

from conformance._src.calling.devices import other_memory_kinds
from conformance._src.declared.contract import Contract
from conformance._src.declared.draw import NUMPY_FORMS
from conformance._src.declared.terms import DATA_AXIS, NAMES, dtypes_in_domain, named
from conformance._src.inputs import coverage
from conformance._src.inputs.case import TARGET, Case, MeshArg, Placement
from conformance._src.inputs.coverage import LONG_MAX, MEDIUM_MAX
from conformance._src.library import dtypes as library_dtypes
from conformance._src.library import strategies as library
from conformance._src.library.dtypes import check as _check
from conformance._src.library.dtypes import dtype_arg, x64_enabled
from conformance._src.library.strategies import OTHER_AXIS, values

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


def dtypes(
    *,
    kinds: Sequence[str] | str | None = None,
    sizes: Sequence[int] | int | None = None,
    x64: bool | None = None,
    contract: Contract | str | None = None,
) -> st.SearchStrategy[np.dtype]:
    """JAX dtypes of some ``kinds`` and ``sizes``, float32 first (so it shrinks there): the
    library's ``dtypes`` (read its docstring for ``kinds``, ``sizes`` and ``x64``).

    ``contract=`` gives instead the kit's contract domain (the input dtypes
    ``pjit_double`` must keep: ``"seed"`` or ``"full"``), with no kinds or sizes;
    its 64-bit dtypes (float64, int64, complex128) as ``x64`` says, by default
    while ``jax_enable_x64`` is on when the strategy is built.

    >>> dtypes(contract="seed").example()
    dtype('float32')
    >>> dtypes(kinds=["float", "float8"], sizes=[8, 16]).example()  # doctest: +SKIP
    dtype(float8_e5m2)
    """
    if contract is None:
        return library_dtypes.dtypes(kinds=kinds, sizes=sizes, x64=x64)
    _check(x64 in (None, True, False), f"x64={x64!r} must be True, False or None")
    _check(
        kinds is None and sizes is None,
        f"give dtypes() a contract or kinds/sizes, not both (contract={contract!r}, "
        f"kinds={kinds!r}, sizes={sizes!r})",
    )
    wide = x64_enabled() if x64 is None else x64
    return st.sampled_from(dtypes_in_domain(contract_arg(contract), x64=wide))


def mesh_args_of(contract: Contract) -> tuple[MeshArg, ...]:
    """How the function is given its mesh: ``mesh=`` a mesh, ``mesh=None``, no mesh argument."""
    if not contract.takes_mesh:
        return ("omit",)
    return ("mesh", "none", "omit") if contract.mesh_optional else ("mesh",)


def contract_arg(contract: object) -> Contract:
    """``"seed"``, ``"full"`` or a declared contract of the one-vector form."""
    if isinstance(contract, Contract):
        why = contract.one_vector()
        if why is not None:
            raise InvalidArgument(f"contract={contract.name!r} is not of the one-vector form: {why}")
        return contract
    try:
        return named(str(contract))
    except ValueError:
        raise InvalidArgument(f"contract={contract!r} must be one of {list(NAMES)}") from None


def meshes(**how: Any) -> st.SearchStrategy[Mesh]:
    """The library's ``meshes`` (the same keywords), the axes it names itself named as the contract
    names them: the data axis ``DATA_AXIS`` a vector is split over, and ``OTHER_AXIS``."""
    return library.meshes(default_axes=(DATA_AXIS, OTHER_AXIS), **how)


def placements(
    *,
    length: int,
    devices: Sequence[jax.Device] | None = None,
    kinds: Sequence[str] | None = None,
    target: bool = True,
) -> st.SearchStrategy[Placement]:
    """Where the input lives (``coverage.PLACEMENTS``): NumPy (plain, or a strided or
    reversed view, non-native byte order, read-only), uncommitted, one device,
    sharded elsewhere, already in the target layout, or in another memory kind
    than the default (``pinned_host``, ...: in the target layout or on one device).

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
    return _placements(length=length, devices=devices, kinds=tuple(chosen), target=target)


@st.composite
def _placements(
    draw: st.DrawFn,
    *,
    length: int,
    devices: Sequence[jax.Device] | None,
    kinds: tuple[str, ...],
    target: bool = True,
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
    if kind == "memory":
        device = int(draw(st.sampled_from(pool)).id)
        where = draw(st.sampled_from(["target", device])) if target else device
        return ("memory", draw(st.sampled_from(other_memory_kinds())), where)
    ids = [int(d.id) for d in draw(st.permutations(pool))]
    sizes = [k for k in range(1, len(pool) + 1) if length % k == 0]
    size = draw(st.sampled_from(sizes))
    how = draw(st.sampled_from(["split", "replicated"]))
    return ("sharded", tuple(ids[:size]), how)


def cases(
    *,
    contract: Contract | str = "full",
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
    contract = contract_arg(contract)
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
            dtype_arg(d)
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
    allowed: Sequence[MeshArg] = mesh_args if mesh_args is not None else mesh_args_of(contract)
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
