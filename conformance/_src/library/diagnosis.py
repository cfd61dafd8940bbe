"""What a value failure says besides expected and got: where the wrong elements lie among the
shards, the pattern they make, and whether rounding can explain them.

* ``shard_diagnosis``: for a result split into shards, which shards (by device and index range)
  hold wrong elements and which hold right ones, at any size (one element per shard included,
  as Hypothesis leaves a failure after shrinking), and the patterns that point to a collective:
  the wrong elements all scaled by one factor (a mesh axis's size: a ``psum`` where a ``pmean``
  belongs, or one too many), offset by one amount, zero, or lying on shard edges.
* ``exact_hint`` and ``close_hint``: arithmetic, when the shards say nothing.  Precision is
  blamed only where rounding explains the error: within a few ulp of the dtype, or where every
  wrong element is a value of a narrower type (bfloat16, float16) within its rounding, as a
  computation run in that type returns.
* ``whole``: a small leaf printed whole, both arrays, as ``numpy.testing`` does.

Everything here reads host data and shard indices; nothing raises.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import ml_dtypes
import numpy as np

from conformance._src.library import tolerance, values

# A leaf of at most this many elements is printed whole in a failure, both arrays.
WHOLE_MAX = 100

# How close (relatively) the wrong elements' ratios or differences must be to call them one.
_SAME = 1e-3

# The narrower float types a computation may run in, and their machine epsilon.
_NARROWER = (("bfloat16", 2.0**-7), ("float16", 2.0**-10))
_NARROWER_SURE = 4  # wrong elements it takes to name the narrower type for sure


Ranges = tuple[tuple[int, int], ...]


def index_ranges(index: tuple[slice, ...], shape: tuple[int, ...]) -> Ranges:
    """A shard's index as [start, stop) per dimension."""
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape, strict=False))


def block_text(ranges: Ranges) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in ranges) + "]"


def _blocks(got: Any) -> dict[Ranges, list[int]] | None:
    """The distinct blocks of a sharded ``jax.Array`` and the devices holding each (None: not
    sharded, or nothing to read)."""
    if not isinstance(got, jax.Array) or got.ndim == 0:
        return None
    try:
        shards = got.addressable_shards
    except Exception:  # noqa: BLE001 -- a deleted or unusual array: no diagnosis, never an error
        return None
    blocks: dict[Ranges, list[int]] = {}
    for shard in shards:
        blocks.setdefault(index_ranges(shard.index, got.shape), []).append(int(shard.device.id))
    return blocks if len(blocks) >= 2 else None


def _axis_sizes(got: Any) -> dict[str, int]:
    mesh = getattr(getattr(got, "sharding", None), "mesh", None)
    shape = getattr(mesh, "shape", None)
    return {str(k): int(v) for k, v in shape.items()} if shape else {}


def _one(found: np.ndarray) -> float | None:
    """The value all of ``values`` share (within _SAME), if they do."""
    if not len(found) or not np.isfinite(found).all():
        return None
    first = float(np.median(found))
    scale = max(abs(first), float(np.abs(found).max()), 1e-30)
    return first if bool((np.abs(found - first) <= _SAME * scale).all()) else None


def _factor_text(factor: float, sizes: dict[str, int]) -> str:
    for name, size in sizes.items():
        if size > 1 and math.isclose(factor, size, rel_tol=_SAME):
            return (
                f"{factor:g}, the size of mesh axis {name!r}: a psum over {name!r} where a pmean "
                "belongs or where no reduction does, or a sum over every device's copy"
            )
        if size > 1 and math.isclose(factor, 1 / size, rel_tol=_SAME):
            return (
                f"1/{size}, one over the size of mesh axis {name!r}: a pmean over {name!r} where a "
                "psum belongs, a divisor summed over {name!r} once too often, or a mean taken over "
                "the devices as well"
            )
    return f"{factor:g}"


def _pattern(
    have: np.ndarray, want: np.ndarray, bad: np.ndarray, sizes: dict[str, int], *, everywhere: bool
) -> str | None:
    """The pattern of the wrong elements, if they make one: one factor, one offset, all zero
    (``everywhere``: no device holds a right shard, so nothing was added "on some devices")."""
    kind = have.dtype.kind
    if not (kind in "biuf" or values.is_float(have.dtype) or tolerance.is_integer(have.dtype)):
        return None
    with np.errstate(all="ignore"):
        g = np.asarray(have[bad]).astype(np.float64)
        w = np.asarray(want[bad]).astype(np.float64)
    if not (np.isfinite(g).all() and np.isfinite(w).all()):
        return None
    if (g == 0).all():
        return "every wrong element is 0: a shard left unwritten, masked out, or never reduced into"
    nonzero = w != 0
    if nonzero.all():
        factor = _one(g / w)
        if factor is not None and not math.isclose(factor, 1, rel_tol=_SAME):
            return (
                f"every wrong element is the expected value times {_factor_text(factor, sizes)}: look at "
                "the collectives (psum, pmean, all_gather) and the axes they reduce over"
            )
    offset = _one(g - w)
    if offset is not None and abs(offset) > _SAME * float(np.abs(w).max()) and len(g) >= 2:
        if everywhere:
            return (
                f"every wrong element is the expected value plus {offset:g}: a term added twice, or "
                "once on every device's copy and summed, or a bias applied twice"
            )
        return (
            f"every wrong element is the expected value plus {offset:g}: a term added on some "
            "devices only, a carry or a prefix from the wrong shard, or a bias applied twice"
        )
    return None


def shard_diagnosis(got: Any, have: np.ndarray, want: np.ndarray, bad: np.ndarray, what: str) -> str | None:
    """Where the wrong elements lie among the shards of ``got`` and what pattern they make; None
    when ``got`` is not split into two or more blocks."""
    if bad.shape != tuple(getattr(got, "shape", ())):
        return None
    blocks = _blocks(got)
    sizes = _axis_sizes(got)
    if blocks is None and not sizes:
        return None  # not laid out over a mesh: nothing of shards or axes to say
    most = _within(tolerance.ulp_distances(have[bad], want[bad]))
    if most is not None and most <= tolerance.ROUNDING_ULP:
        return None  # rounding is no shard's fault
    if blocks is None:  # every device holds the whole of it: the pattern alone, axes named
        pattern = _pattern(have, want, bad, sizes, everywhere=True)
        return None if pattern is None else f"every device holds the whole {what} (replicated); {pattern}"
    wrong: dict[Ranges, tuple[int, int]] = {}
    for ranges in blocks:
        region = bad[tuple(slice(a, b) for a, b in ranges)]
        if region.any():
            wrong[ranges] = (int(region.sum()), int(region.size))
    if not wrong:
        return None
    points = np.argwhere(bad)
    for dim in range(got.ndim):  # the wrong elements on the shards' edges along a split dimension
        spans = sorted({r[dim] for r in blocks})
        if len(spans) < 2 or min(b - a for a, b in spans) < 3:
            continue  # not split along dim, or every index is at a shard's edge
        edges = {a for a, _ in spans} | {b - 1 for _, b in spans}
        inner = edges - {0, got.shape[dim] - 1}
        at = set(points[:, dim].tolist())
        if len(points) >= 2 and at <= edges and at & inner:
            return (
                f"every wrong element lies on the first or last index of a shard along dimension "
                f"{dim}, which the shards split at {', '.join(f'{a}:{b}' for a, b in spans)} (the wrong "
                f"ones in the shards on devices {sorted({d for r in wrong for d in blocks[r]})}): look at "
                "what crosses shard boundaries (a halo exchange, a shift or a roll, padding, an "
                "off-by-one in a shard's range)"
            )

    def listed(found: list[str]) -> str:
        return ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")

    wrong_text = listed(
        [
            f"{block_text(r)} on device(s) {sorted(blocks[r])} ({n} of {size})"
            for r, (n, size) in sorted(wrong.items())
        ]
    )
    right = [r for r in sorted(blocks) if r not in wrong]
    right_text = listed([f"{block_text(r)} on device(s) {sorted(blocks[r])}" for r in right])
    whole = all(2 * n >= size for n, size in wrong.values())
    where = f"wrong elements in {len(wrong)} of the {len(blocks)} shards of the {what}: {wrong_text}" + (
        f"; right: {right_text}" if right else "; no shard is right"
    )
    pattern = _pattern(have, want, bad, sizes, everywhere=not right)
    if pattern is not None:
        return f"{where}. {pattern}"
    if right and whole:
        return (
            f"{where}. Look at what those shards get differently (a collective over the wrong axis "
            "or devices, their share of the input, padding of the last shard)"
        )
    return None


def _within(ulps: np.ndarray | None) -> float | None:
    """The largest ulp distance of the wrong elements, if every one has a finite one."""
    if ulps is None or not len(ulps) or not np.isfinite(ulps).all():
        return None
    return float(ulps.max())


def _round_up(x: float) -> float:
    """``x`` rounded up to one significant digit."""
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10.0 ** math.floor(math.log10(x))
    return math.ceil(x / scale * (1 - 1e-12)) * scale


def exact_hint(have: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str:
    if tolerance.is_integer(have.dtype) or have.dtype.kind == "b":
        return (
            "integers are compared exactly: look at overflow (integers wrap in their dtype), a "
            "division or a cast that rounds, or the formula"
        )
    hint = (
        "values are compared bit for bit (any NaN matches any NaN; a zero of the same sign "
        "matches a subnormal): look at signs of zero, rounding through a narrower type, the "
        "order of a sum, or the formula"
    )
    most = _within(tolerance.ulp_distances(have[bad], want[bad]))
    default = tolerance.default_tolerance(have.dtype)
    if most is not None and most <= tolerance.ROUNDING_ULP and default:
        hint += (
            f"; every differing element is within {int(most)} ulp, as rounding differences are: "
            f"if they are acceptable here, compare with assert_values_close ({have.dtype}: "
            f"rtol=atol={default:g})"
        )
    return hint


def _narrower(got: np.ndarray, relative: np.ndarray) -> str | None:
    """The narrower float type the wrong elements were computed in, where that shows: every one
    is a value of that type (it round-trips through it exactly) and within its rounding."""
    parts = [got.real, got.imag] if got.dtype.kind == "c" else [got]
    if not len(relative) or parts[0].dtype.itemsize <= 2:
        return None
    for name, eps in _NARROWER:
        narrow = np.dtype(getattr(ml_dtypes, name) if name == "bfloat16" else name)
        with np.errstate(over="ignore", invalid="ignore"):
            exact = all(bool((p.astype(narrow).astype(p.dtype) == p).all()) for p in parts)
        if exact and bool((relative <= 4 * eps).all()):
            return name
    return None


def close_hint(
    have: np.ndarray,
    candidates: list[np.ndarray],
    verdict: tolerance.Verdict,
    atol: tolerance.Bound,
) -> str:
    bad = ~verdict.ok
    numeric = have.dtype.kind in "biufc" or values.is_float(have.dtype) or tolerance.is_integer(have.dtype)
    if not numeric:
        return f"values of dtype {have.dtype} are not numbers: they are compared for equality"
    if not np.isfinite(verdict.error[bad]).all():
        return (
            "a NaN or an infinity where a number is expected, or the reverse: look at overflow, "
            "0/0, the log of 0, or a mask that lets them through"
        )
    if tolerance.is_integer(have.dtype) or have.dtype.kind == "b":
        return (
            "integers are compared on their exact difference: look at overflow (integers wrap in "
            "their dtype), a division or a cast that rounds, or the formula"
        )
    chosen = (
        np.choose(verdict.candidate[bad], [c[bad] for c in candidates])
        if len(candidates) > 1
        else (candidates[0][bad])
    )
    most = _within(tolerance.ulp_distances(have[bad], chosen))
    magnitudes = np.abs(chosen.astype(np.complex128 if have.dtype.kind == "c" else np.float64))
    errors = verdict.error[bad]
    if most is not None and most <= tolerance.ROUNDING_ULP:
        if (magnitudes > 0).all():
            floor = np.broadcast_to(np.asarray(atol, np.float64), bad.shape)[bad]
            wanted = f"rtol={_round_up(float(((errors - floor) / magnitudes).max())):.0e}"
        else:
            wanted = f"atol={_round_up(float(errors.max())):.0e}"
        return (
            f"the wrong elements are within {int(most)} ulp: rounding, or another order of "
            f"accumulation; if that is acceptable here, a looser tolerance accepts them ({wanted})"
        )
    far = "" if most is None else f" ({int(most)} ulp)"
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(magnitudes > 0, errors / magnitudes, np.inf)
    narrower = _narrower(have[bad], relative)
    if narrower is not None:
        # A few wrong elements are a narrower type's values by chance as often as not (1 + 2**-10
        # is a float16 value whatever made it): the hint says how sure it is.
        few = int(bad.sum()) < _NARROWER_SURE
        how = f"may run in {narrower} or another narrow type" if few else f"runs in {narrower}"
        return (
            f"further off than {have.dtype}'s rounding{far}, and every wrong element is a {narrower} "
            f"value within {narrower}'s rounding: the computation {how} (a cast, "
            "jax.default_matmul_precision); compute in the input's dtype"
        )
    return (
        f"further off than rounding{far}: not a matter of precision or tolerance; look at the "
        "formula and at the data each wrong element is computed from"
    )


def whole(array: np.ndarray) -> str | None:
    """A small array as NumPy prints it (every value distinct as written), None if too large."""
    if array.size > WHOLE_MAX or array.ndim == 0:
        return None
    try:
        text = np.array2string(
            array, separator=", ", formatter={"all": str}, threshold=WHOLE_MAX + 1, max_line_width=100
        )
    except Exception:  # noqa: BLE001 -- an exotic dtype NumPy cannot print: the worst element stays
        return None
    return text
