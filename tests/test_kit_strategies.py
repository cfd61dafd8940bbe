"""The strategies really reach the inputs where implementations break, and the cases replay exactly.

Coverage tests draw many examples with a fixed seed (``derandomize``),
collect what they saw and assert that every target was met, so a strategy
that silently stops producing, say, 2-D meshes or NaNs fails here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from jax.sharding import NamedSharding, PartitionSpec

from conformance import strategies as cst
from conformance._src.declared.terms import dtypes_in_domain, named
from conformance._src.inputs.case import (
    NUMPY_FORMS,
    Case,
    decode,
    describe_placement,
    encode,
    make_input,
    make_mesh,
)

T = TypeVar("T")
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
_SIEVE = np.ones(cst.MAX_LENGTH + 1, dtype=bool)
_SIEVE[:2] = False
for _p in range(2, int(cst.MAX_LENGTH**0.5) + 1):
    if _SIEVE[_p]:
        _SIEVE[_p * _p :: _p] = False
PRIMES = set(np.flatnonzero(_SIEVE).tolist())
QUIET = list(HealthCheck)


def collect(strategy: st.SearchStrategy[T], examples: int) -> list[T]:
    """Everything ``strategy`` draws in ``examples`` runs with a fixed seed."""
    seen: list[T] = []

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=QUIET,
        phases=("generate",),
    )
    @given(strategy)
    def run(value: T) -> None:
        seen.append(value)

    run()
    assert seen, "nothing drawn"
    return seen


def draw_once(strategy: st.SearchStrategy[Any]) -> Any:
    return find(
        strategy,
        lambda _: True,
        settings=settings(database=None, max_examples=10, suppress_health_check=QUIET),
    )


def _ids(mesh: Any) -> list[int]:
    return [int(d.id) for d in mesh.devices.flat]


# ---------------------------------------------------------------------------
# Lengths


def test_lengths_reach_empty_long_prime_and_boundary_lengths() -> None:
    seen = set(collect(cst.lengths(), 400))
    assert all(0 <= n <= cst.MAX_LENGTH for n in seen)
    assert 0 in seen and 1 in seen
    assert any(n >= 2048 for n in seen), sorted(seen)[-5:]
    assert len(seen & PRIMES) >= 10 and any(p > 2048 for p in seen & PRIMES), sorted(seen & PRIMES)
    assert {2047, 2048, 2049} & seen and {1023, 1024, 1025} & seen


@pytest.mark.parametrize("data_size", [3, 8])
def test_lengths_reach_multiples_of_the_data_size_and_their_neighbours(data_size: int) -> None:
    seen = set(collect(cst.lengths(data_size=data_size, divisible=None), 200))
    multiples = {n for n in seen if n and n % data_size == 0}
    assert len(multiples) >= 5, sorted(seen)
    assert any(n - 1 in seen for n in multiples) and any(n + 1 in seen for n in multiples)
    assert {n % data_size for n in seen} == set(range(data_size))
    assert 0 in seen and any(n >= 2048 for n in seen)


def test_lengths_divisible_true_yields_only_multiples_yet_still_zero_and_long_ones() -> None:
    seen = set(collect(cst.lengths(data_size=8, divisible=True), 150))
    assert all(n % 8 == 0 and 0 <= n <= cst.MAX_LENGTH for n in seen)
    assert 0 in seen and any(n >= 2048 for n in seen) and len(seen) >= 20


def test_lengths_divisible_false_yields_only_non_multiples_near_the_multiples() -> None:
    seen = set(collect(cst.lengths(data_size=6, divisible=False), 150))
    assert all(n % 6 and 0 < n <= cst.MAX_LENGTH for n in seen)
    assert {1, 5} <= {n % 6 for n in seen}  # neighbours of multiples on both sides
    assert seen & PRIMES and any(n >= 2048 for n in seen)


@settings(max_examples=80, derandomize=True, database=None, deadline=None, suppress_health_check=QUIET)
@given(st.data(), st.integers(1, 16), st.integers(0, 200))
def test_lengths_respect_divisibility_and_bounds_for_any_data_size(
    data: st.DataObject, data_size: int, extra: int
) -> None:
    top = data_size + extra
    n = data.draw(cst.lengths(data_size=data_size, divisible=True, max_length=top))
    assert 0 <= n <= top and n % data_size == 0
    if data_size > 1:
        m = data.draw(cst.lengths(data_size=data_size, divisible=False, max_length=top))
        assert 0 < m <= top and m % data_size != 0
    k = data.draw(cst.lengths(data_size=data_size, divisible=None, max_length=top))
    assert 0 <= k <= top


# ---------------------------------------------------------------------------
# Meshes


@pytest.fixture(scope="module")
def drawn_meshes() -> list[Any]:
    return collect(cst.meshes(), 200)


def test_meshes_have_every_size_from_one_to_all_devices(drawn_meshes: list[Any]) -> None:
    assert {m.devices.size for m in drawn_meshes} == set(range(1, 9))
    for m in drawn_meshes:
        ids = _ids(m)
        assert len(set(ids)) == len(ids) and set(ids) <= set(range(8))


def test_meshes_are_1d_data_or_2d_with_data_in_either_position(drawn_meshes: list[Any]) -> None:
    kinds = {m.axis_names for m in drawn_meshes}
    assert kinds == {("data",), ("data", "model"), ("model", "data")}
    for names in (("data", "model"), ("model", "data")):
        shapes = {m.devices.shape for m in drawn_meshes if m.axis_names == names}
        assert any(min(s) > 1 for s in shapes), (names, shapes)  # truly two-dimensional
        data_sizes = {s[names.index("data")] for s in shapes if max(s) > 1}
        assert 1 in data_sizes and max(data_sizes) > 1, shapes  # a model axis alone, and data too


def test_meshes_use_device_subsets_in_any_order(drawn_meshes: list[Any]) -> None:
    orders = [_ids(m) for m in drawn_meshes]
    assert any(ids != sorted(ids) for ids in orders)  # not sorted
    assert any(0 not in ids for ids in orders)  # not always starting at device 0
    assert any(ids[0] == 7 for ids in orders)
    full = [ids for ids in orders if len(ids) == 8]
    assert any(ids != list(range(8)) for ids in full)  # all devices, shuffled


def test_meshes_obey_their_arguments() -> None:
    pool = jax.devices()[2:6]
    for m in collect(cst.meshes(devices=pool, min_size=2, max_size=3, ndims=(2,)), 60):
        assert 2 <= m.devices.size <= 3 and len(m.axis_names) == 2
        assert set(_ids(m)) <= {2, 3, 4, 5}
    for m in collect(cst.meshes(min_size=8, ndims=(1,)), 20):
        assert m.axis_names == ("data",) and sorted(_ids(m)) == list(range(8))


# ---------------------------------------------------------------------------
# Values


def _float_targets(a: np.ndarray) -> set[str]:
    """What kinds of special value ``a`` (real floats) holds."""
    fi = ml_dtypes.finfo(a.dtype) if a.dtype == BF16 else np.finfo(a.dtype)
    with np.errstate(invalid="ignore"):
        x = a.astype(np.float64)
    big, tiny = float(fi.max), float(fi.smallest_normal)
    kinds = {
        "nan": np.isnan(x),
        "+inf": x == np.inf,
        "-inf": x == -np.inf,
        "-0.0": (x == 0) & np.signbit(x),
        "+0.0": (x == 0) & ~np.signbit(x),
        "subnormal": (x != 0) & (np.abs(x) < tiny),
        "max": x == big,
        "-max": x == -big,
        "largest double-finite": np.abs(x) == big / 2,  # just below overflow: 2x is max
        "smallest double-overflow": np.abs(x) == 2.0 ** (fi.maxexp - 1),  # 2x is inf
        "ordinary": np.isfinite(x) & (np.abs(x) >= tiny) & (np.abs(x) <= big / 2),
    }
    return {name for name, mask in kinds.items() if mask.any()}


FLOAT_TARGETS = {
    "nan",
    "+inf",
    "-inf",
    "-0.0",
    "+0.0",
    "subnormal",
    "max",
    "-max",
    "largest double-finite",
    "smallest double-overflow",
    "ordinary",
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_float_values_reach_every_special_value(dtype: np.dtype) -> None:
    seen: set[str] = set()
    arrays = collect(cst.values(dtype=dtype, length=256), 60)
    for a in arrays:
        assert a.dtype == dtype and a.shape == (256,)
        seen |= _float_targets(a)
    assert seen == FLOAT_TARGETS
    with np.errstate(invalid="ignore"):
        nans = [a.view(f"u{dtype.itemsize}")[np.isnan(a.astype(np.float64))] for a in arrays]
    payloads = {int(b) for bits in nans for b in bits}
    assert len(payloads) >= 3  # NaNs of several signs and payloads


@pytest.mark.parametrize("dtype", [np.dtype(np.complex64), np.dtype(np.complex128)], ids=str)
def test_complex_values_reach_special_components(dtype: np.dtype) -> None:
    seen: set[str] = set()
    for a in collect(cst.values(dtype=dtype, length=128), 40):
        assert a.dtype == dtype and a.shape == (128,)
        seen |= _float_targets(a.real.copy()) | _float_targets(a.imag.copy())
    assert seen == FLOAT_TARGETS


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_integer_values_reach_the_extremes_and_values_whose_double_wraps(dtype: str) -> None:
    info = np.iinfo(dtype)
    seen: set[int] = set()
    for a in collect(cst.values(dtype=dtype, length=8), 150):
        assert a.dtype == np.dtype(dtype) and a.shape == (8,)
        seen |= {int(v) for v in a}
    assert {int(info.min), int(info.max), 0, 1} <= seen
    assert any(v > info.max // 2 for v in seen)  # 2 * v wraps
    if info.min < 0:
        assert -1 in seen and any(v < info.min // 2 for v in seen)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_special_floats_hold_the_values_their_docstring_promises(dtype: np.dtype) -> None:
    specials = cst.special_floats(dtype)
    assert specials.dtype == dtype
    assert _float_targets(specials) == FLOAT_TARGETS
    bits = specials.view(f"u{dtype.itemsize}")
    assert len(set(bits.tolist())) == specials.size  # no duplicates
    fi = ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)
    one_up = np.nextafter(np.float64(1), 2) if dtype == np.float64 else None
    wanted = [
        0.0,
        np.inf,
        float(fi.max),
        float(fi.max) / 2,
        2.0 ** (fi.maxexp - 1),
        float(fi.smallest_normal),
        float(fi.smallest_subnormal),
        3 * float(fi.smallest_subnormal),
        float(fi.smallest_normal) - float(fi.smallest_subnormal),  # the largest subnormal
        float(fi.smallest_normal) / 2,  # a subnormal whose double is normal
        1.0,
        1.5,
        float(one_up) if one_up is not None else 1.0 + float(fi.eps),
    ]
    with np.errstate(invalid="ignore"):  # NaN payloads of narrow types warn when cast
        values = specials.astype(np.float64)
    for w in wanted:
        for v in (w, -w):
            assert ((values == v) & (np.signbit(values) == np.signbit(v))).any(), (dtype, v)
    nan_bits = {int(b) & ~(1 << (8 * dtype.itemsize - 1)) for b in bits[np.isnan(values)]}
    assert len(nan_bits) >= 2  # a quiet NaN and one with another payload, in both signs
    assert np.signbit(values[np.isnan(values)]).sum() * 2 == np.isnan(values).sum()


# ---------------------------------------------------------------------------
# Dtypes, placements, cases


def test_dtypes_are_exactly_the_contract_domain() -> None:
    full = dtypes_in_domain(named("full"), x64=False)
    assert set(collect(cst.dtypes(contract="full", x64=False), 80)) == set(full)
    assert len(full) == 10 and BF16 in full and np.dtype("complex64") in full
    wide = set(collect(cst.dtypes(contract=named("full"), x64=True), 100))
    assert wide == set(dtypes_in_domain(named("full"), x64=True))
    assert {np.dtype("float64"), np.dtype("int64"), np.dtype("complex128")} <= wide
    assert set(collect(cst.dtypes(contract="seed"), 10)) == {np.dtype("float32")}
    assert set(collect(cst.dtypes(contract="full"), 80)) == set(full)  # x64 follows jax's config: off here


@pytest.fixture(scope="module")
def drawn_cases() -> list[Case]:
    return collect(cst.cases(contract="full", any_placement=True, max_length=8), 200)


@pytest.fixture(scope="module")
def indivisible_cases() -> list[Case]:
    return collect(cst.cases(contract="full", divisible=False, max_length=64), 40)


def test_cases_reach_every_dtype_mesh_argument_and_placement(drawn_cases: list[Case]) -> None:
    cases = drawn_cases
    assert {c.dtype for c in cases} == set(dtypes_in_domain(named("full"), x64=False))
    assert {c.mesh_arg for c in cases} == {"omit", "none", "mesh"}
    placed = {c.placement[0] for c in cases}
    assert placed == {"uncommitted", "numpy", "device", "sharded", "target", "memory"}
    assert any(c.placement[0] == "numpy" and len(c.placement) > 1 for c in cases)  # the views too
    views = collect(cst.cases(contract="full", placement_kinds=["numpy-view"], max_length=8), 40)
    assert {c.placement[1] for c in views} == set(NUMPY_FORMS)
    for c in cases:
        assert (c.mesh is None) == (c.mesh_arg != "mesh")
        size = 1 if c.mesh is None else int(c.mesh.shape["data"])
        assert c.n % size == 0 and c.values.shape == (c.n,)
    assert any(c.mesh is not None and c.mesh.devices.ndim == 2 for c in cases)
    assert any(c.n == 0 for c in cases)


def test_seed_cases_call_with_float32_only_and_no_mesh() -> None:
    for c in collect(cst.cases(contract="seed", max_length=40), 25):
        assert c.dtype == np.float32 and c.mesh_arg == "omit" and c.mesh is None
        assert c.placement == ("uncommitted",)


def test_indivisible_cases_have_a_data_axis_that_does_not_divide_the_length(
    indivisible_cases: list[Case],
) -> None:
    cases = indivisible_cases
    for c in cases:
        size = int(c.mesh.shape["data"])
        assert c.mesh_arg == "mesh" and size >= 2 and c.n % size != 0
    assert len({int(c.mesh.shape["data"]) for c in cases}) >= 4


def test_placements_reach_every_kind() -> None:
    seen = collect(cst.placements(length=8), 100)
    kinds = {p[0] if p[0] != "sharded" else f"sharded-{p[2]}" for p in seen}
    every = {"uncommitted", "numpy", "device", "sharded-split", "sharded-replicated", "target", "memory"}
    assert kinds == every
    assert {p[1] for p in seen if p[0] == "device"} == set(range(8))
    sharded = [p[1] for p in seen if p[0] == "sharded"]
    assert all(8 % len(ids) == 0 and len(set(ids)) == len(ids) for ids in sharded)
    assert {len(ids) for ids in sharded} == {1, 2, 4, 8}
    assert any(list(ids) != sorted(ids) for ids in sharded)
    for p in collect(cst.placements(length=7), 60):  # only 1 or 7 devices split 7 elements
        assert p[0] != "sharded" or len(p[1]) in (1, 7)


@pytest.mark.parametrize(
    "placement",
    [
        ("numpy",),
        ("uncommitted",),
        ("device", 5),
        ("sharded", (6, 1, 3, 0), "split"),
        ("sharded", (2, 7), "replicated"),
    ],
    ids=describe_placement,
)
def test_make_input_puts_x_where_the_placement_says(placement: tuple[Any, ...]) -> None:
    values = np.arange(8, dtype=np.float32)
    x = make_input(Case(values, placement=placement))
    assert np.array_equal(np.asarray(x), values)
    if placement[0] == "numpy":
        assert type(x) is np.ndarray
        return
    assert isinstance(x, jax.Array)
    if placement[0] == "uncommitted":
        assert not x.committed
    elif placement[0] == "device":
        assert x.committed and {d.id for d in x.devices()} == {5}
    else:
        ids = list(placement[1])
        assert isinstance(x.sharding, NamedSharding)
        assert _ids(x.sharding.mesh) == ids
        spec = PartitionSpec("p") if placement[2] == "split" else PartitionSpec()
        assert x.sharding.spec == spec


# ---------------------------------------------------------------------------
# Invalid arguments


INVALID_NOW: list[Callable[[], object]] = [
    lambda: cst.lengths(data_size=0),
    lambda: cst.lengths(data_size=-2),
    lambda: cst.lengths(data_size=2.0),  # type: ignore[arg-type]
    lambda: cst.lengths(max_length=-1),
    lambda: cst.lengths(data_size=8, max_length=7),
    lambda: cst.lengths(divisible=False),  # every length divides by 1
    lambda: cst.values(dtype="float32", length=-1),
    lambda: cst.values(dtype="float32", length=2.5),  # type: ignore[arg-type]
    lambda: cst.values(dtype="bool", length=3, allow_nan=True),  # bool has no NaN
    lambda: cst.values(dtype="U4", length=3),
    lambda: cst.special_floats("int8"),
    lambda: cst.special_floats("complex64"),
    lambda: cst.meshes(min_size=0),
    lambda: cst.meshes(min_size=5, max_size=4),
    lambda: cst.meshes(ndims=(-1,)),
    lambda: cst.meshes(ndims=()),
    lambda: cst.meshes(devices=jax.devices()[:2], min_size=3),
    lambda: cst.placements(length=-1),
]


@pytest.mark.parametrize("make", INVALID_NOW, ids=range(len(INVALID_NOW)))
def test_invalid_arguments_raise_invalid_argument_when_called(make: Callable[[], object]) -> None:
    with pytest.raises(InvalidArgument):
        make()


def test_too_many_devices_raise_invalid_argument_when_drawn() -> None:
    strategy = cst.meshes(max_size=9)  # the devices are counted when drawing, not when building
    with pytest.raises(InvalidArgument, match="8 devices"):
        draw_once(strategy)
    with pytest.raises(InvalidArgument):
        draw_once(cst.meshes(min_size=9))


# ---------------------------------------------------------------------------
# encode / decode


def _assert_same_case(a: Case, b: Case) -> None:
    assert b.values.dtype == a.values.dtype and b.values.shape == a.values.shape
    bits = f"u{a.values.dtype.itemsize // (2 if a.values.dtype.kind == 'c' else 1)}"
    assert np.array_equal(b.values.view(bits), a.values.view(bits))  # NaN payloads, signs of zero
    assert (a.mesh is None) == (b.mesh is None)
    if a.mesh is not None:
        assert _ids(b.mesh) == _ids(a.mesh)
        assert b.mesh.devices.shape == a.mesh.devices.shape
        assert b.mesh.axis_names == a.mesh.axis_names
        assert b.mesh == a.mesh
    assert b.mesh_arg == a.mesh_arg
    assert b.placement == a.placement and type(b.placement) is tuple
    assert repr(b) == repr(a)


def test_encode_decode_round_trips_drawn_cases_exactly(
    drawn_cases: list[Case], indivisible_cases: list[Case]
) -> None:
    for case in drawn_cases + indivisible_cases:
        token = encode(case)
        assert re.fullmatch(r"[A-Za-z0-9_\-=]+", token)  # one shell word, no quoting needed
        _assert_same_case(case, decode(token))


def test_encode_decode_round_trips_wide_dtypes_odd_meshes_and_empty_vectors() -> None:
    nan_payload = np.array([0x7FF0000000000001, 0x8000000000000000, 0xFFF8000000000000], np.uint64)
    samples = [
        Case(
            nan_payload.view(np.float64),
            make_mesh([5, 2, 7, 0], (2, 2), ("model", "data")),
            "mesh",
            ("sharded", (3, 1), "replicated"),
        ),
        Case(nan_payload[:2].view(np.complex128), None, "none", ("device", 6)),
        Case(np.array([1, -1, 2**62], np.int64), make_mesh([7], (1,), ("data",)), "mesh", ("numpy",)),
        Case(np.zeros(0, BF16), None, "omit", ("uncommitted",)),
        Case(
            np.array([0x8001, 0x7FC1], np.uint16).view(BF16),
            make_mesh(list(range(8)), (4, 2), ("data", "model")),
            "mesh",
            ("sharded", (7, 6, 5, 4, 3, 2, 1, 0), "split"),
        ),
        Case(np.array([-0.0, 1e-45], np.float32).astype(np.complex64), None, "omit", ("uncommitted",)),
    ]
    for case in samples:
        _assert_same_case(case, decode(encode(case)))


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        "",
        encode(Case(np.arange(3, dtype=np.float32)))[:-8],  # cut short
        __import__("base64").urlsafe_b64encode(__import__("zlib").compress(b'{"dtype": "float32"}')).decode(),
    ],
)
def test_a_token_that_is_not_one_is_a_case_token_error(token: str) -> None:
    from conformance._src.inputs.case import CaseTokenError, parse

    with pytest.raises(CaseTokenError):
        parse(token)


def test_parse_needs_no_devices_and_decode_names_a_missing_device(monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance._src.inputs.case import CaseTokenError, parse

    token = encode(Case(np.arange(4, dtype=np.float32), make_mesh([6, 1], (2,), ("data",)), "mesh"))
    data = parse(token)
    assert (data.mesh_ids, data.mesh_shape, data.mesh_axes, data.n) == ((6, 1), (2,), ("data",), 4)
    monkeypatch.setattr(jax, "devices", lambda: list(jax.local_devices())[:3])
    with pytest.raises(CaseTokenError, match=r"uses device 6, but the devices are \[0, 1, 2\]"):
        decode(token)


# ---------------------------------------------------------------------------
# Device counts: each check declares the devices it needs


def test_checks_declare_the_devices_they_need() -> None:
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CHECKS
    from conformance._src.running import declared_checks  # noqa: F401 -- and those of any declaration

    judging = [c for c in CHECKS.values() if c.applies(named("full"))]
    full = {c.id: c.devices_needed(named("full")) for c in judging if c.devices_needed(named("full")) > 1}
    assert full == {"divisibility.error": 2, "divisibility.no-false-error": 4, "state.first-call": 2}
    assert all(c.devices_needed(named("seed")) == 1 for c in CHECKS.values() if c.applies(named("seed")))
    declared = [c for c in CHECKS.values() if c.declared]
    assert declared and all(
        not c.applies(named("full")) and c.devices_needed(named("full")) == 2 for c in declared
    )


@pytest.mark.parametrize("count", [1, 2, 3])
def test_on_fewer_devices_strategies_draw_only_what_they_allow(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CHECKS

    few = list(jax.devices())[:count]
    monkeypatch.setattr(jax, "devices", lambda: few)
    allowed = {int(d.id) for d in few}
    for check in CHECKS.values():
        if check.domain is None or not check.applies(named("full")):
            continue
        if check.devices_needed(named("full")) > count:
            with pytest.raises(pytest.skip.Exception, match=rf"^not applicable: needs \d devices, {count} "):
                check.strategy(named("full"))
            continue
        strategy = check.strategy(named("full"))

        @settings(max_examples=10, database=None, deadline=None, suppress_health_check=QUIET)
        @given(strategy)
        def only_allowed_devices(example: Any) -> None:
            for case in getattr(example, "cases", (example,)):
                used = set() if case.mesh is None else {int(d.id) for d in case.mesh.devices.flat}
                if case.placement[0] == "device":
                    used.add(case.placement[1])
                elif case.placement[0] == "sharded":
                    used.update(case.placement[1])
                assert used <= allowed, case

        only_allowed_devices()
