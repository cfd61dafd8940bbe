"""The bodies of the public assertions (``conformance.assertions``: read its docstring)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Sharding

from conformance._src import internals
from conformance._src.contract import oracle
from conformance._src.library import jit_probe

flush_subnormals = oracle.flush_subnormals

KINDS = (
    "dtype",  # assert_values_equal
    "shape",
    "values",
    "not-an-array",  # assert_layout, assert_shards
    "memory-kind",
    "layout",
    "shards",
    "outputs",  # assert_jit_shardings
    "not-jit",
    "jit-shardings",
    "recompiled",  # assert_compiles_once
    "deleted",  # assert_input_intact
    "changed",
)


class AssertionFailed(AssertionError):
    """A failed assertion: ``summary``, ``expected``, ``got`` and a ``hint``, each also an attribute,
    and ``kind``, what failed, one of ``KINDS`` (stable: for code that reacts to a failure)."""

    def __init__(self, kind: str, summary: str, *, expected: str, got: str, hint: str | None = None) -> None:
        assert kind in KINDS, kind
        self.kind, self.summary, self.expected, self.got, self.hint = kind, summary, expected, got, hint
        lines = [summary, f"  expected: {expected}", f"  got:      {got}"]
        if hint:
            lines.append(f"  hint:     {hint}")
        super().__init__("\n".join(lines))


def _where(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, index)) + "]"


def host_copy(array: Any, fill: np.ndarray | None = None) -> np.ndarray:
    """``array`` on the host.  In multi-process runs a process holds only some shards: the rest
    is taken from ``fill`` (what they should hold; the process holding them judges them) where
    it has the array's shape, else they are zeros."""
    if isinstance(array, jax.Array) and array.size == 0:
        # Nothing to read (and JAX 0.10 cannot copy some empty sharded arrays to the host).
        return np.zeros(array.shape, array.dtype)
    if not isinstance(array, jax.Array) or array.is_fully_addressable:
        return np.asarray(array)
    if fill is None or np.shape(fill) != array.shape:
        return np.zeros(array.shape, array.dtype)
    out = np.array(fill, dtype=array.dtype)
    for shard in array.addressable_shards:
        out[shard.index] = np.asarray(shard.data)
    return out


# ---------------------------------------------------------------------------
# Values


def assert_values_equal(
    got: Any,
    expected: Any,
    *,
    alternatives: Sequence[Any] = (),
    flush: bool = True,
    what: str = "result",
) -> None:
    """``got`` has ``expected``'s dtype, shape and values, bit for bit.

    Any NaN matches any NaN (payloads and signs of NaN are free); zeros keep
    their sign.  With ``flush`` (the default) a zero of the same sign also
    matches a subnormal ``expected`` value: XLA on CPU flushes subnormal
    inputs and results to zero.  Where an *input* may be subnormal, compute
    the expected value from the flushed input too and pass it in
    ``alternatives``; each element must match ``expected`` or one of them::

        assert_values_equal(y, 2 * x, alternatives=[2 * flush_subnormals(x)])

    Complex numbers match when both components match the same candidate.
    Works on every dtype: integers and booleans compare exactly.
    """
    __tracebackhide__ = True
    want = np.asarray(expected)
    have = host_copy(got, want)
    if have.dtype != want.dtype:
        raise AssertionFailed(
            "dtype",
            f"the {what} has the wrong dtype",
            expected=str(want.dtype),
            got=str(have.dtype),
            hint="keep the input's dtype: multiply by Python scalars (weakly typed), or cast back "
            "with .astype(x.dtype)",
        )
    if have.shape != want.shape:
        raise AssertionFailed(
            "shape",
            f"the {what} has the wrong shape",
            expected=f"shape {want.shape}",
            got=f"shape {have.shape}",
        )
    candidates = [want] + [np.asarray(a, dtype=want.dtype) for a in alternatives]
    for other in candidates[1:]:
        if other.shape != want.shape:
            raise ValueError(f"an alternative has shape {other.shape}, expected has {want.shape}")
    bad = np.argwhere(~oracle.values_match(have, candidates, flush=flush))
    if not len(bad):
        return
    index = tuple(int(i) for i in bad[0])
    shown = " or ".join(dict.fromkeys(oracle.show(c[index]) for c in candidates))
    raise AssertionFailed(
        "values",
        f"{len(bad)} of {want.size} elements of the {what} differ"
        + (f" (the first at {_where(index)})" if index else ""),
        expected=f"{what}{_where(index)} = {shown}",
        got=f"{what}{_where(index)} = {oracle.show(have[index])}",
        hint="values are compared bit for bit (any NaN matches any NaN; a zero of the same sign "
        "matches a subnormal): look at signs of zero, rounding through a narrower type, or "
        "elements that a shard boundary or a padding touched",
    )


# ---------------------------------------------------------------------------
# Layout


def _describe(sharding: Any) -> str:
    return jit_probe.describe(sharding)


def _index(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape, strict=False))


def _shards(array: jax.Array) -> dict[int, list[tuple[tuple[int, int], ...]]]:
    """Device id -> the index ranges of the shards on it ([start, stop) per dimension)."""
    found: dict[int, list[tuple[tuple[int, int], ...]]] = {}
    for shard in array.addressable_shards:
        found.setdefault(int(shard.device.id), []).append(_index(shard.index, array.shape))
    return found


def _require_array(result: Any, what: str) -> jax.Array:
    __tracebackhide__ = True
    if not isinstance(result, jax.Array):
        raise AssertionFailed(
            "not-an-array",
            f"the {what} is not a jax.Array, so it has no layout to check",
            expected="a jax.Array",
            got=f"{type(result).__module__}.{type(result).__qualname__}",
            hint="return the jitted function's output itself, not np.asarray(...) or a Python list",
        )
    return result


def assert_layout(result: Any, target: Sharding, *, shards: bool = True, what: str = "result") -> None:
    """``result`` is a ``jax.Array`` laid out as ``target``: its sharding is equivalent to it, in the
    same memory kind, and (``shards=True``) every addressable shard lies on the device and
    covers the index ranges that ``target`` gives that device (``assert_shards``)."""
    __tracebackhide__ = True
    array = _require_array(result, what)
    memory = getattr(array.sharding, "memory_kind", None)
    if memory is not None and target.memory_kind is not None and memory != target.memory_kind:
        raise AssertionFailed(
            "memory-kind",
            f"the {what} is not in the memory the target layout names",
            expected=f"memory_kind={target.memory_kind!r}",
            got=f"memory_kind={memory!r} ({array.sharding!r})",
            hint="leave the output in device memory: no memory_kind='pinned_host' or other offloading",
        )
    if not array.sharding.is_equivalent_to(target, array.ndim):
        got_ids = sorted(int(getattr(d, "id", -1)) for d in array.sharding.device_set)
        want_ids = sorted(int(getattr(d, "id", -1)) for d in target.device_set)
        hint = (
            f"the {what} lies on devices {got_ids}, the target on {want_ids}: build the output "
            f"sharding from the mesh you were given"
            if got_ids != want_ids
            else "the right devices, split another way: compare the partition specs, and the order of "
            "the mesh's devices and axes"
        )
        raise AssertionFailed(
            "layout",
            f"the {what} does not have the requested layout",
            expected=f"a sharding equivalent to {_describe(target)}",
            got=_describe(array.sharding),
            hint=hint,
        )
    if shards:
        assert_shards(array, target, what=what)


def assert_shards(result: Any, target: Sharding, *, what: str = "result") -> None:
    """Every addressable shard of ``result`` lies on the device, and covers the index ranges,
    that ``target`` gives it for ``result``'s shape, and no device holds a shard it should not."""
    __tracebackhide__ = True
    array = _require_array(result, what)
    want_map: Any = target.addressable_devices_indices_map(array.shape)
    want = {int(d.id): [_index(i, array.shape)] for d, i in want_map.items()}
    got = _shards(array)
    if got == want:
        return
    device = sorted(set(got) ^ set(want) or {d for d in want if got.get(d) != want[d]})[0]
    raise AssertionFailed(
        "shards",
        f"the {what}'s shards are not where the target layout puts them (device {device} first differs)",
        expected=f"device {device} holds {_ranges(want.get(device))}",
        got=f"device {device} holds {_ranges(got.get(device))}",
        hint="each device must hold exactly the block the target sharding assigns it: "
        "check the partition spec and the order of the mesh's devices",
    )


def _ranges(blocks: list[tuple[tuple[int, int], ...]] | None) -> str:
    if not blocks:
        return "no shard"
    return ", ".join("[" + ", ".join(f"{a}:{b}" for a, b in block) + "]" for block in blocks)


# ---------------------------------------------------------------------------
# jit with given shardings


def _equivalent(sharding: Any, target: Sharding, ndim: int) -> bool:
    return isinstance(sharding, Sharding) and sharding.is_equivalent_to(target, ndim)


def _inputs_ok(call: jit_probe.JitCall, want: Sharding | Sequence[Sharding | None] | None) -> bool:
    if want is None:
        return True
    if isinstance(want, Sharding):
        return all(_equivalent(s, want, ndim) for ndim, s in call.inputs if ndim > 0)
    if len(want) > len(call.inputs):
        return False
    return all(w is None or _equivalent(s, w, ndim) for w, (ndim, s) in zip(want, call.inputs, strict=False))


def assert_jit_shardings(
    fn: Callable[..., Any],
    *args: Any,
    in_shardings: Sharding | Sequence[Sharding | None] | None,
    out_shardings: Sharding | Sequence[Sharding | None],
    **kwargs: Any,
) -> Any:
    """Call ``fn(*args, **kwargs)`` for real and check that ``jax.jit`` computed each output
    with the given shardings; return the result.

    ``out_shardings`` is one sharding for every output (the pytree's leaves) or
    one per output, ``None`` for "any"; ``in_shardings`` is one sharding for
    every input array of that jit (scalars aside), one per input in order, or
    ``None`` for "any".  An output computed outside ``jax.jit`` (eager ops,
    ``jax.device_put``), or by a jit that was given other shardings, fails:
    right values and even the right layout do not show that the computation
    was compiled with the shardings.  The jit may be nested in others.
    """
    __tracebackhide__ = True
    result, chains = jit_probe.observe_outputs(fn, *args, **kwargs)
    leaves = jax.tree_util.tree_leaves(result)
    wanted = list(out_shardings) if not isinstance(out_shardings, Sharding) else [out_shardings] * len(leaves)
    if len(wanted) != len(leaves):
        raise AssertionFailed(
            "outputs",
            "the function returned another number of outputs than out_shardings names",
            expected=f"{len(wanted)} output(s)",
            got=f"{len(leaves)} output(s)",
        )
    for k, (leaf, chain, target) in enumerate(zip(leaves, chains, wanted, strict=True)):
        ndim = int(getattr(leaf, "ndim", 0))
        label = "the result" if len(leaves) == 1 else f"output {k}"
        if not chain:
            raise AssertionFailed(
                "not-jit",
                f"{label} is not computed by jax.jit",
                expected="an output of a jax.jit call",
                got="no jax.jit execution returned it (eager ops, jax.device_put, or a copy after the jit)",
                hint="compute it with jax.jit(f, in_shardings=..., out_shardings=...) and return that "
                "output as it is",
            )
        if any(
            (target is None or _equivalent(c.out_sharding, target, ndim)) and _inputs_ok(c, in_shardings)
            for c in chain
        ):
            continue
        outer = chain[-1]
        want_in = (
            "any"
            if in_shardings is None
            else _describe(in_shardings)
            if isinstance(in_shardings, Sharding)
            else "[" + ", ".join("any" if s is None else _describe(s) for s in in_shardings) + "]"
        )
        raise AssertionFailed(
            "jit-shardings",
            f"{label} comes out of jax.jit, but not with the given shardings",
            expected=f"in_shardings={want_in}, "
            f"out_shardings={'any' if target is None else _describe(target)}",
            got=f"jit {outer.name!r} with in_shardings=["
            + ", ".join(_describe(s) for _, s in outer.inputs)
            + f"], out_shardings={_describe(outer.out_sharding)}",
            hint="pass the shardings to jax.jit itself (in_shardings=, out_shardings=); "
            "a device_put before or after the jit does not compile the computation with them",
        )
    return result


# ---------------------------------------------------------------------------
# Compilation and the caller's input


def _ready(value: Any) -> Any:
    return jax.block_until_ready(value)


def assert_compiles_once(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)`` twice; the second call must compile nothing.

    Counts XLA backend compiles, so a function that builds a new
    ``jax.jit(...)`` (or a new lambda under one) per call fails, while one
    that keeps its jitted function passes.  Returns the second result.  The
    arguments are passed twice: a function that donates them cannot be
    checked this way.
    """
    __tracebackhide__ = True
    counter = internals.compile_counter()
    _ready(fn(*args, **kwargs))
    before = counter.count
    result = _ready(fn(*args, **kwargs))
    compiles = counter.count - before
    if compiles:
        raise AssertionFailed(
            "recompiled",
            "a second call with the same arguments compiled again",
            expected="0 backend compiles in the second call",
            got=f"{compiles} backend compile(s)",
            hint="build the jitted function once and keep it: a new jax.jit(...) or a new lambda per "
            "call, or a cache keyed on the arrays' identity, recompiles",
        )
    return result


def assert_input_intact(before: np.ndarray, x: Any, *, what: str = "x") -> None:
    """The caller's ``x`` still holds ``before`` (a host copy taken before the call): not
    deleted (buffer donation), the same dtype and shape, the same bits in every element.

    >>> before = np.array(x); y = f(x); assert_input_intact(before, x)  # doctest: +SKIP
    """
    __tracebackhide__ = True
    before = np.asarray(before)
    if isinstance(x, jax.Array) and x.is_deleted():
        raise AssertionFailed(
            "deleted",
            f"the caller's {what} was deleted by the call",
            expected=f"{what} still usable after the call",
            got=f"{what}.is_deleted() is True",
            hint="buffer donation (donate_argnums/donate_argnames) deletes the input, on CPU too; "
            "the caller still owns it",
        )
    now = host_copy(x, before)
    if before.ndim == 0 and now.ndim == 0:
        before, now = before.reshape(1), now.reshape(1)
    if (
        now.shape == before.shape
        and now.dtype != before.dtype
        and now.dtype.newbyteorder("=") == before.dtype
    ):
        now = now.astype(before.dtype)  # the same values in the caller's byte order
    if now.dtype != before.dtype or now.shape != before.shape:
        raise AssertionFailed(
            "changed",
            f"the caller's {what} was changed by the call",
            expected=f"{what} of dtype {before.dtype} and shape {before.shape}",
            got=f"{what} of dtype {now.dtype} and shape {now.shape}",
            hint="do not write into the input or replace its buffer (donation, in-place ops)",
        )
    differs = (oracle.bits(now) != oracle.bits(before)).any(axis=-1)
    if differs.any():
        index = tuple(int(i) for i in np.argwhere(differs)[0])
        raise AssertionFailed(
            "changed",
            f"the caller's {what} was changed by the call",
            expected=f"{what}{_where(index)} = {oracle.show(before[index])}",
            got=f"{what}{_where(index)} = {oracle.show(now[index])}",
            hint="do not write into the input (in-place NumPy ops on np.asarray(x), donation)",
        )
