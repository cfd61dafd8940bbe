"""The value oracle, rule by rule and both ways: the right answer passes, a wrong one fails.

The oracle is NumPy only, so these tests need no devices.  16-bit floats and
8- and 16-bit integers are checked exhaustively; wider types by Hypothesis
over raw bit patterns plus the hand-picked edges.
"""

from __future__ import annotations

import warnings

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conformance._src.contract.oracle import Mismatch, element_ok, first_mismatch, is_float, show
from conformance._src.declared.pjit_double import doubled
from conformance.strategies import special_floats

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
FLOAT_IDS = [str(d) for d in FLOATS]
INTS = [
    np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
]
PROPERTY = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


def _bits_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _f(dtype: np.dtype, *bits: int) -> np.ndarray:
    """An array of ``dtype`` from raw bit patterns."""
    return np.array(bits, dtype=_bits_dtype(dtype)).view(dtype)


def _bits_of(dtype: np.dtype, value: float) -> int:
    return int(np.array([value]).astype(dtype).view(_bits_dtype(dtype))[0])


def _v(dtype: np.dtype, *values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64).astype(dtype)


def ok(dtype: np.dtype, x: float | complex, got: float | complex) -> bool:
    """The oracle's verdict for one element given as Python numbers."""
    xs, gs = np.array([x]).astype(dtype), np.array([got]).astype(dtype)
    return bool(element_ok(xs, gs)[0])


def ok_bits(dtype: np.dtype, x: int, got: int) -> bool:
    return bool(element_ok(_f(dtype, x), _f(dtype, got))[0])


def _finfo(dtype: np.dtype):  # noqa: ANN202 -- numpy's or ml_dtypes' finfo
    return ml_dtypes.finfo(dtype) if dtype == BF16 else np.finfo(dtype)


def _layout(dtype: np.dtype) -> tuple[int, int]:
    """(mantissa bits, sign bit) of a float dtype."""
    man = {2: 10, 4: 23, 8: 52}[dtype.itemsize] if dtype != BF16 else 7
    return man, 1 << (8 * dtype.itemsize - 1)


def _complex(dtype: np.dtype, re: float, im: float) -> np.ndarray:
    """A one-element complex array with exactly these components (signs of zero kept)."""
    out = np.zeros(1, dtype=dtype)
    out.real, out.imag = re, im
    return out


# ---------------------------------------------------------------------------
# Integers wrap like NumPy's 2 * x


def test_integers_wrap_in_their_own_dtype() -> None:
    assert ok(np.dtype(np.int8), 100, -56) and not ok(np.dtype(np.int8), 100, 127)  # saturating
    assert ok(np.dtype(np.uint8), 200, 144) and not ok(np.dtype(np.uint8), 200, 255)
    assert ok(np.dtype(np.int8), -100, 56) and not ok(np.dtype(np.int8), -100, -128)
    assert ok(np.dtype(np.int8), -128, 0) and not ok(np.dtype(np.int8), -128, -128)
    assert ok(np.dtype(np.int8), 3, 6) and not ok(np.dtype(np.int8), 3, 7)
    assert not ok(np.dtype(np.int8), 3, 3)  # an identity is not a doubling


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_doubling_wraps_modulo_the_width_and_saturation_is_rejected(dtype: np.dtype) -> None:
    info = np.iinfo(dtype)
    if dtype.itemsize <= 2:  # every value
        x = np.arange(int(info.min), int(info.max) + 1, dtype=np.int64).astype(dtype)
    else:
        edges = [
            info.min,
            info.min + 1,
            info.min // 2 - 1,
            info.min // 2,
            -1,
            0,
            1,
            info.max // 2,
            info.max // 2 + 1,
            info.max - 1,
            info.max,
        ]
        x = np.array(sorted({int(e) for e in edges if info.min <= e <= info.max}), dtype=dtype)
    exact = [2 * int(v) for v in x]
    wrapped = np.array(
        [(e - int(info.min)) % 2 ** (8 * dtype.itemsize) + int(info.min) for e in exact], dtype=dtype
    )
    saturated = np.array([min(max(e, int(info.min)), int(info.max)) for e in exact], dtype=dtype)
    assert np.array_equal(doubled(x), wrapped)
    assert element_ok(x, wrapped).all()
    overflowing = saturated != wrapped
    assert overflowing.any()
    assert not element_ok(x, saturated)[overflowing].any()
    assert not element_ok(x, wrapped + dtype.type(1)).any()  # off by one, everywhere


# ---------------------------------------------------------------------------
# Floats: bit for bit


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_ordinary_floats_must_be_exact_to_the_last_bit(dtype: np.dtype) -> None:
    x = _v(dtype, 1.0, -1.5, 3.0, 0.1, -1e3)
    want = _v(dtype, 2.0, -3.0, 6.0, 0.2, -2e3)
    assert np.array_equal(doubled(x).view(_bits_dtype(dtype)), want.view(_bits_dtype(dtype)))
    assert element_ok(x, want).all()
    up = (want.view(_bits_dtype(dtype)) + 1).view(dtype)  # 1 ulp away from zero
    down = (want.view(_bits_dtype(dtype)) - 1).view(dtype)  # 1 ulp towards zero
    assert not element_ok(x, up).any()
    assert not element_ok(x, down).any()
    assert not element_ok(x, x).any()


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_the_sign_of_zero_is_kept_both_ways(dtype: np.dtype) -> None:
    _, sign = _layout(dtype)
    assert ok_bits(dtype, 0, 0) and ok_bits(dtype, sign, sign)
    assert not ok_bits(dtype, 0, sign)  # +0.0 doubled to -0.0
    assert not ok_bits(dtype, sign, 0)  # -0.0 doubled to +0.0


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_overflow_must_give_infinity(dtype: np.dtype) -> None:
    fi = _finfo(dtype)
    big, half = float(fi.max), float(fi.max) / 2
    for s in (1.0, -1.0):
        assert ok(dtype, s * big, s * np.inf)
        assert not ok(dtype, s * big, s * big)  # saturating at the largest finite value
        assert not ok(dtype, s * big, -s * np.inf)
        assert not ok(dtype, s * big, np.nan)
        assert ok(dtype, s * half, s * big)  # the largest value whose double is finite
        assert not ok(dtype, s * half, s * np.inf)  # premature overflow
        assert ok(dtype, s * np.inf, s * np.inf) and not ok(dtype, s * np.inf, -s * np.inf)
        assert not ok(dtype, s * np.inf, s * big)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_any_nan_matches_any_nan_but_nan_and_numbers_never_match(dtype: np.dtype) -> None:
    man, sign = _layout(dtype)
    inf = _bits_of(dtype, np.inf)
    quiet, payload = inf | (1 << (man - 1)), inf | 1
    nans = [quiet, payload, quiet | sign, payload | sign, inf | 0b101]
    with np.errstate(invalid="ignore"):  # casting NaN payloads of narrow types warns
        assert all(np.isnan(_f(dtype, *nans).astype(np.float64)))
    for a in nans:
        for b in nans:  # payload and sign are free
            assert ok_bits(dtype, a, b)
    one, two = _bits_of(dtype, 1.0), _bits_of(dtype, 2.0)
    for nan in nans:
        assert not ok_bits(dtype, one, nan)  # NaN where a number is due
        assert not ok_bits(dtype, 0, nan) and not ok_bits(dtype, inf, nan)
        assert not ok_bits(dtype, nan, two)  # a number where NaN is due
        assert not ok_bits(dtype, nan, 0) and not ok_bits(dtype, nan, inf)
        assert not ok_bits(dtype, nan, nan ^ inf)  # same mantissa, finite


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_subnormals_may_flush_to_a_zero_of_the_same_sign_only(dtype: np.dtype) -> None:
    man, sign = _layout(dtype)
    smallest, largest_sub, small_normal = 1, (1 << man) - 1, 1 << man
    for s in (0, sign):
        # a subnormal input whose exact double is subnormal too
        assert ok_bits(dtype, s | smallest, s | 2)
        assert ok_bits(dtype, s | smallest, s)  # flushed, same sign
        assert not ok_bits(dtype, s | smallest, s ^ sign)  # flushed, opposite sign
        assert not ok_bits(dtype, s | smallest, s | 1)  # not doubled and not flushed
        assert not ok_bits(dtype, s | smallest, s | 3)
        # a subnormal input whose exact double is normal: the input may be flushed
        want = int(doubled(_f(dtype, s | largest_sub)).view(_bits_dtype(dtype))[0])
        assert want & ~sign >= small_normal  # really normal
        assert ok_bits(dtype, s | largest_sub, want)
        assert ok_bits(dtype, s | largest_sub, s)
        assert not ok_bits(dtype, s | largest_sub, s ^ sign)
        # a normal input and a normal result: zero is wrong
        assert ok_bits(dtype, s | small_normal, s | (2 << man))
        assert not ok_bits(dtype, s | small_normal, s)
        assert not ok_bits(dtype, s | small_normal, s ^ sign)
        assert not ok_bits(dtype, s | _bits_of(dtype, 1.0), s)


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_every_16_bit_float_exhaustively(dtype: np.dtype) -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    x = bits.view(dtype)
    want = doubled(x)
    assert want.dtype == dtype
    # doubled() agrees with doubling in float64 and rounding back (exact, overflow -> inf)
    with np.errstate(invalid="ignore", over="ignore"):
        via64 = (x.astype(np.float64) * 2).astype(dtype)
        nan = np.isnan(x.astype(np.float64))
    assert np.array_equal(want.view(np.uint16)[~nan], via64.view(np.uint16)[~nan])
    assert np.isnan(want[nan].astype(np.float64)).all()
    assert element_ok(x, want).all()
    # flipping any one mantissa bit of a finite, normal result is rejected
    man, _ = _layout(dtype)
    w64 = want.astype(np.float64)
    normal = np.isfinite(w64) & (np.abs(w64) >= float(_finfo(dtype).smallest_normal))
    assert normal.sum() > 50000
    for k in range(man):
        flipped = (want.view(np.uint16) ^ np.uint16(1 << k)).view(dtype)
        assert not element_ok(x, flipped)[normal].any(), k
    # one ulp away from zero is rejected for every finite result
    finite = np.isfinite(w64)
    assert not element_ok(x, (want.view(np.uint16) + np.uint16(1)).view(dtype))[finite].any()


def _check_wide(x: np.ndarray, flip: np.ndarray) -> dict[str, int]:
    """The oracle's rules on an array of float32/float64 ``x``; ``flip``: a mantissa bit per element."""
    dtype = x.dtype
    bits = _bits_dtype(dtype)
    fi = _finfo(dtype)
    want = doubled(x)
    assert element_ok(x, want).all()
    with np.errstate(over="ignore", invalid="ignore"):
        exact = np.ldexp(x.astype(np.longdouble), 1)  # 2x with more range than dtype
    w = want.astype(np.longdouble)
    nan = np.isnan(x)
    overflow = ~nan & (np.abs(exact) > fi.max)
    normal = np.isfinite(w) & (np.abs(w) >= fi.smallest_normal)
    subnormal = (x != 0) & (np.abs(x) < fi.smallest_normal)
    assert np.isnan(want[nan]).all()
    assert np.array_equal(w[~nan & ~overflow], exact[~nan & ~overflow])
    assert np.array_equal(want[overflow], np.copysign(np.inf, x[overflow]).astype(dtype))
    # one flipped mantissa bit of a normal result; the largest finite value for an overflow
    flipped = (want.view(bits) ^ (bits.type(1) << flip.astype(bits))).view(dtype)
    assert not element_ok(x, flipped)[normal].any()
    saturated = np.copysign(fi.max, x).astype(dtype)
    assert not element_ok(x, saturated)[overflow].any()
    # a zero of either sign for a normal result, the wrong sign of zero for a subnormal input
    assert not element_ok(x, np.zeros_like(x))[normal & ~subnormal].any()
    assert not element_ok(x, np.copysign(np.zeros_like(x), -x))[subnormal].any()
    return {
        "normal": int(normal.sum()),
        "overflow": int(overflow.sum()),
        "nan": int(nan.sum()),
        "subnormal": int(subnormal.sum()),
        "inf": int(np.isinf(x).sum()),
    }


def _float_bits(dtype: np.dtype, size: int) -> st.SearchStrategy[np.ndarray]:
    """Arrays of bit patterns: sign, exponent and mantissa drawn apart, so that every
    exponent (zero/subnormal, the largest finite, inf/NaN) comes up as often as any."""
    man, _ = _layout(dtype)
    exp = 8 * dtype.itemsize - 1 - man
    top = (1 << exp) - 1
    exponents = st.one_of(st.integers(0, top), st.sampled_from([0, 1, top - 1, top]))
    mantissas = st.one_of(st.integers(0, (1 << man) - 1), st.sampled_from([0, 1, (1 << man) - 1]))
    parts = st.tuples(st.integers(0, 1), exponents, mantissas)
    elements = parts.map(lambda p: p[0] << (exp + man) | p[1] << man | p[2])
    return hnp.arrays(_bits_dtype(dtype), size, elements=elements, fill=st.nothing())


WIDE = [np.dtype(np.float32), np.dtype(np.float64)]


@pytest.mark.parametrize("dtype", WIDE, ids=["float32", "float64"])
def test_wide_floats_property_over_bit_patterns(dtype: np.dtype) -> None:
    man, _ = _layout(dtype)
    seen: dict[str, int] = {}

    @settings(PROPERTY, max_examples=60)
    @given(_float_bits(dtype, 16), st.integers(0, man - 1))
    def check(bits: np.ndarray, k: int) -> None:
        for key, count in _check_wide(bits.view(dtype), np.full(bits.shape, k)).items():
            seen[key] = seen.get(key, 0) + count

    check()
    assert min(seen.values()) >= 5, seen  # the property really met each kind of value


@pytest.mark.parametrize("dtype", WIDE, ids=["float32", "float64"])
def test_wide_floats_sweep_every_sign_and_exponent(dtype: np.dtype) -> None:
    man, _ = _layout(dtype)
    width = 8 * dtype.itemsize
    rng = np.random.default_rng(20240601)
    per = 256  # mantissas per sign and exponent: 0, all ones, the rest at random
    heads = np.arange(1 << (width - man), dtype=np.uint64)  # sign and exponent
    mantissas = rng.integers(0, 1 << man, size=(heads.size, per), dtype=np.uint64)
    mantissas[:, 0], mantissas[:, 1] = 0, (1 << man) - 1
    bits = ((heads[:, None] << np.uint64(man)) | mantissas).ravel().astype(_bits_dtype(dtype))
    flip = rng.integers(0, man, size=bits.size)
    seen = _check_wide(bits.view(dtype), flip)
    assert seen.pop("inf") == 2
    assert min(seen.values()) >= 2 * (per - 1), seen  # per sign: all mantissas but one


# ---------------------------------------------------------------------------
# Complex: component by component


@pytest.mark.parametrize("dtype", [np.dtype(np.complex64), np.dtype(np.complex128)], ids=str)
def test_complex_numbers_are_judged_component_by_component(dtype: np.dtype) -> None:
    def ok_c(x: tuple[float, float], got: tuple[float, float]) -> bool:
        return bool(element_ok(_complex(dtype, *x), _complex(dtype, *got))[0])

    assert ok_c((1.0, 2.0), (2.0, 4.0))
    assert not ok_c((1.0, 2.0), (2.0, 2.0))  # only the real part doubled
    assert not ok_c((1.0, 2.0), (1.0, 4.0))
    assert not ok_c((1.0, 2.0), (4.0, 2.0))  # components swapped
    part = np.dtype(f"f{dtype.itemsize // 2}")
    up = float((np.array([4.0], part).view(f"u{part.itemsize}") + 1).view(part)[0])
    assert not ok_c((1.0, 2.0), (2.0, up))  # one ulp in one component
    # the sign of zero in each component: the doubling's, or 2 * x's (re = 2a - 0*b), nothing else
    assert ok_c((1.0, -0.0), (2.0, -0.0)) and ok_c((1.0, -0.0), (2.0, 0.0))  # 2 * (1-0j) is 2+0j
    assert ok_c((-0.0, 1.0), (-0.0, 2.0)) and not ok_c((-0.0, 1.0), (0.0, 2.0))  # both give -0.0 there
    assert ok_c((-0.0, -1.0), (-0.0, -2.0)) and ok_c((-0.0, -1.0), (0.0, -2.0))  # -0 - (-0) is +0
    assert not ok_c((1.0, 2.0), (-2.0, 4.0)) and not ok_c((-0.0, 1.0), (-0.0, -2.0))
    # overflow and NaN per component
    big = float(np.finfo(part).max)
    assert ok_c((big, 1.0), (np.inf, 2.0)) and not ok_c((big, 1.0), (big, 2.0))
    assert ok_c((np.nan, 1.0), (np.nan, 2.0)) and not ok_c((1.0, 1.0), (np.nan, 2.0))
    # subnormal components may flush to a zero of their own sign
    sub = float(np.finfo(part).smallest_subnormal)
    assert ok_c((sub, 1.0), (0.0, 2.0)) and not ok_c((sub, 1.0), (-0.0, 2.0))
    assert not ok_c((sub, 1.0), (0.0, 0.0))  # flushing only ever touches the subnormal component


@pytest.mark.parametrize("dtype", [np.dtype(np.complex64), np.dtype(np.complex128)], ids=str)
@pytest.mark.parametrize(
    "x",
    [
        (np.inf, 0.0),
        (np.inf, -0.0),
        (-np.inf, 1.0),
        (1.0, np.inf),
        (np.nan, 1.0),
        (0.0, np.nan),
        (np.inf, np.inf),
        (np.inf, np.nan),
    ],
)
def test_the_ieee_product_is_accepted_where_a_component_is_inf_or_nan(
    dtype: np.dtype, x: tuple[float, float]
) -> None:
    xs = _complex(dtype, *x)
    with np.errstate(invalid="ignore"):
        product = xs * dtype.type(2)  # what 2 * x is in XLA, e.g. inf+0j -> inf+nanj
    assert element_ok(xs, doubled(xs))[0]
    assert element_ok(xs, product)[0]
    assert not element_ok(xs, _complex(dtype, 1.0, 1.0))[0]


@pytest.mark.parametrize("dtype", [np.dtype(np.complex64), np.dtype(np.complex128)], ids=str)
def test_2x_and_x_plus_x_conform_for_complex_and_nothing_else_near_them(dtype: np.dtype) -> None:
    part = np.dtype(f"f{dtype.itemsize // 2}")
    ubits = np.dtype(f"u{part.itemsize}")
    sub = float(np.finfo(part).smallest_subnormal)
    differ = 0
    for re in (0.0, -0.0, 1.0, -3.0, sub, -sub, float(np.finfo(part).max)):
        for im in (0.0, -0.0, 2.0, -0.5, sub):
            xs = _complex(dtype, re, im)
            with np.errstate(over="ignore", invalid="ignore"):
                product = xs * dtype.type(2)  # numpy's complex product: no flushing
            assert element_ok(xs, doubled(xs))[0]
            if np.isfinite(product.real[0]) and abs(product.real[0]) >= np.finfo(part).smallest_normal:
                assert element_ok(xs, product)[0], (re, im)
            differ += not np.array_equal(doubled(xs).view(ubits), product.view(ubits))
            # one ulp off in the real part, or a sign flipped on a non-zero part: never accepted
            wrong = doubled(xs).copy()
            if wrong.real[0] != 0 and np.isfinite(wrong.real[0]):
                wrong.real = -wrong.real
                assert not element_ok(xs, wrong)[0], (re, im)
    assert differ >= 4  # the zero signs where 2 * x and x + x part ways


@pytest.mark.parametrize("how", ["x + x", "2 * x", "x * 2"])
def test_the_oracle_accepts_what_xla_on_this_machine_computes(how: str) -> None:
    """Ties the allowances to the real backend: flushing, NaN payloads, 2 * x for complex."""
    fn = jax.jit({"x + x": lambda v: v + v, "2 * x": lambda v: 2 * v, "x * 2": lambda v: v * 2}[how])
    specials = special_floats("float32")
    pairs = np.empty((specials.size, specials.size), dtype=np.complex64)  # every pair of special components
    pairs.real, pairs.imag = specials[:, None], specials[None, :]
    inputs = [np.arange(1 << 16, dtype=np.uint16).view(d) for d in (np.float16, BF16)]
    inputs += [specials, pairs.ravel()]
    small = np.arange(-128, 128, dtype=np.int16)
    inputs += [small.astype(d) for d in (np.int8, np.uint8, np.int16, np.uint16)]
    inputs += [
        np.array([-(2**31), -(2**30) - 1, -1, 0, 1, 2**30, 2**31 - 1], dtype=np.int32),
        np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 1], dtype=np.uint32),
    ]
    for x in inputs:
        got = np.asarray(fn(x))
        assert got.dtype == x.dtype, how
        assert first_mismatch(x, got) is None, (how, x.dtype, first_mismatch(x, got))
    # and what XLA computes for a wrong doubling is caught, not excused by the allowances
    wrong = np.asarray(jax.jit(lambda v: v + v + v)(specials))
    normal = np.isfinite(doubled(specials)) & (np.abs(specials) >= np.finfo(np.float32).smallest_normal)
    assert normal.sum() >= 8
    assert not element_ok(specials, wrong)[normal].any()


def test_the_oracle_itself_never_warns() -> None:
    # Its verdicts end up in a user's test run: overflow and NaN must not spray RuntimeWarnings.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for dtype in (np.dtype(np.float16), BF16):
            x = np.arange(1 << 16, dtype=np.uint16).view(dtype)
            element_ok(x, doubled(x))
            first_mismatch(x, x)
        for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
            x = special_floats(dtype)
            first_mismatch(x, x[::-1].copy())
        for dtype in (np.dtype(np.complex64), np.dtype(np.complex128)):
            parts = special_floats(np.dtype(f"f{dtype.itemsize // 2}"))
            x = np.empty((parts.size, parts.size), dtype=dtype)  # every pair of special components
            x.real, x.imag = parts[:, None], parts[None, :]
            x = x.ravel()
            element_ok(x, doubled(x))
            first_mismatch(x, x[::-1].copy())


# ---------------------------------------------------------------------------
# first_mismatch and show


def test_first_mismatch_names_the_first_bad_element_and_counts_them_all() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype=np.float32)
    got = np.array([2.0, 4.0, 7.0, 8.0, 11.0], dtype=np.float32)
    assert first_mismatch(x, got) == Mismatch(
        index=2, input="3.0 (0x40400000)", expected="6.0 (0x40c00000)", got="7.0 (0x40e00000)", count=2
    )
    assert first_mismatch(x, 2 * x) is None
    assert first_mismatch(x[:0], x[:0]) is None  # length 0
    ints = np.array([100, 1, -128], dtype=np.int8)
    assert first_mismatch(ints, np.array([127, 2, 0], dtype=np.int8)) == Mismatch(0, "100", "-56", "127", 1)


def test_first_mismatch_shows_the_hex_bits_of_nan_and_zero_signs() -> None:
    x = _f(np.dtype(np.float32), 0x80000000, 0x3F800000)  # -0.0, 1.0
    bad = first_mismatch(x, _f(np.dtype(np.float32), 0x00000000, 0xFFC00001))
    assert bad is not None and bad.count == 2 and bad.index == 0
    assert (bad.input, bad.expected, bad.got) == (
        "-0.0 (0x80000000)",
        "-0.0 (0x80000000)",
        "0.0 (0x00000000)",
    )
    bad = first_mismatch(x[1:], _f(np.dtype(np.float32), 0xFFC00001))
    assert bad is not None and bad.got == "nan (0xffc00001)"


def test_show_prints_floats_with_their_hex_bits_in_every_width() -> None:
    assert show(np.float32(1.5)) == "1.5 (0x3fc00000)"
    assert show(np.float16(1.5)) == "1.5 (0x3e00)"
    assert show(BF16.type(1.5)) == "1.5 (0x3fc0)"
    assert show(np.float64(1.5)) == "1.5 (0x3ff8000000000000)"
    assert show(np.float32(-np.inf)) == "-inf (0xff800000)"
    assert show(np.int8(-56)) == "-56" and show(np.uint64(2**64 - 1)) == str(2**64 - 1)
    c64 = np.dtype(np.complex64)
    assert show(_complex(c64, 2.0, -0.0)[0]) == "complex(2.0 (0x40000000), -0.0 (0x80000000))"
    assert show(_complex(c64, -1.0, 0.5)[0]) == "complex(-1.0 (0xbf800000), 0.5 (0x3f000000))"


def test_is_float_covers_bfloat16_and_not_integers_or_complex() -> None:
    assert all(is_float(d) for d in FLOATS)
    assert not any(is_float(d) for d in INTS)
    assert not is_float(np.dtype(np.complex64))
