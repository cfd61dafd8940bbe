"""The checks, one function each, registered under their stable IDs.

Each body gets the session ``kit`` and one drawn ``case`` and raises through
``kit.fail`` with what was expected, what came and a hint.  Defects are named
once: the values check does not judge the dtype, the dtype check does not
judge values, and so on, so a broken implementation fails in the check whose
ID says what is wrong.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import weakref
import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from conformance._src import internals, selftest
from conformance._src.calling import calls
from conformance._src.contract import domains, jax_bugs, oracle
from conformance._src.contract.catalogue import CHECKS, Inconclusive, Refused, check, failure_in
from conformance._src.contract.messages import one_line
from conformance._src.declared import pjit_double
from conformance._src.declared.draw import numpy_form
from conformance._src.declared.terms import (
    DATA_AXIS,
    data_axis_size,
    default_mesh,
    target_sharding,
)
from conformance._src.inputs import coverage, history
from conformance._src.inputs.case import (
    UNCOMMITTED,
    Case,
    MeshArg,
    call_text,
    decode_history,
    describe_mesh,
    describe_placement,
    make_input,
    may_refuse,
)
from conformance._src.library import assertions, jit_probe
from conformance._src.library.strategies import OTHER_AXIS

# ---------------------------------------------------------------------------
# Small helpers shared by several checks


def _devices(sharding: Any) -> list[int]:
    return sorted(int(d.id) for d in sharding.device_set)


def _shard_map(array: Any) -> dict[int, tuple[int, int]]:
    """Device id -> (start, stop) of the vector's shard on it."""
    n = array.shape[0]
    return {int(s.device.id): s.index[0].indices(n)[:2] for s in array.addressable_shards}


def _target_shards(case: Case) -> dict[int, tuple[int, int]]:
    target = target_sharding(case.mesh)
    indices: Any = target.addressable_devices_indices_map((case.n,))
    return {int(d.id): idx[0].indices(case.n)[:2] for d, idx in indices.items()}


def _require_array(kit: Any, case: Case, result: Any) -> None:
    if not isinstance(result, jax.Array):
        kit.fail(
            "the result is not a jax.Array, so it has no layout to check",
            case,
            expected="a jax.Array",
            got=f"{type(result).__module__}.{type(result).__qualname__}",
            hint="return the jitted function's output itself, not np.asarray(...) or a Python list",
        )


def _in_dtype_of(got: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``got`` cast to the input's ``dtype`` (a wrong dtype is dtype.preserved's finding).

    Floats for an integer input go through int64, so that a double out of the
    integer's range wraps as integer doubling does (254.0 for int8 is -2).
    """
    with np.errstate(invalid="ignore", over="ignore"):
        if dtype.kind in "iu" and (oracle.is_float(got.dtype) or got.dtype.kind == "c"):
            return np.nan_to_num(got.real.astype(np.float64)).astype(np.int64).astype(dtype)
        return got.astype(dtype)


def _failure(assertion: Callable[[], None]) -> assertions.AssertionFailed | None:
    """The public assertion's failure, or None.  Its traceback is dropped and the check fails
    outside the ``except`` block: the assertion's frames hold the result (which may be huge),
    and a failure that Hypothesis keeps must not keep the result alive with it."""
    try:
        assertion()
    except assertions.AssertionFailed as failed:
        failed.__traceback__ = None
        return failed
    return None


def judge_numpy_kept(kit: Any, case: Any, made: np.ndarray, given: np.ndarray, name: str) -> None:
    """The caller's NumPy array ``given`` (``name``) keeps what it was ``made`` with: its dtype
    (byte order included), its writeable flag and its shape.  ``case``: a Case or a declared Call."""
    for what, want, got in (
        (f"{name}.dtype", made.dtype, given.dtype),
        (f"{name}.flags.writeable", made.flags.writeable, given.flags.writeable),
        (f"{name}.shape", made.shape, given.shape),
    ):
        if want != got:
            kit.fail(
                "the caller's NumPy array was changed by the call",
                case,
                expected=f"{what} = {want!r}",
                got=f"{what} = {got!r}",
                hint="work on a copy (np.array(x), np.ascontiguousarray) and leave the caller's array, "
                "its dtype and its flags as they were",
            )


def _assert_intact(kit: Any, case: Case, x: Any) -> None:
    """The caller's x is neither deleted nor changed by the call."""
    if isinstance(x, np.ndarray):
        made = numpy_form(case.values.copy(), case.placement[1] if len(case.placement) > 1 else "")
        judge_numpy_kept(kit, case, made, x, "x")
    failed = _failure(lambda: assertions.assert_input_intact(case.values, x))
    if failed is not None:
        hint = (
            "buffer donation (donate_argnums/donate_argnames) deletes the input, on CPU too; "
            "the caller still owns x"
            if failed.kind == "deleted"
            else "do not write into the input or replace its buffer (in-place NumPy ops on "
            "np.asarray(x), donation)"
        )
        kit.fail(failed.summary, case, expected=failed.expected, got=failed.got, hint=hint)


# The last (values, result) pairs found right, weakly held: in the shared pass each call is judged
# by several checks that compare its values (a host copy and a comparison each, of up to 1 MiB).
_RIGHT: collections.deque[tuple[weakref.ref[Any], weakref.ref[Any]]] = collections.deque(maxlen=16)


def _known_right(values: np.ndarray, result: Any) -> bool:
    return any(v() is values and r() is result for v, r in _RIGHT)


def _note_right(values: np.ndarray, result: Any) -> None:
    try:
        _RIGHT.append((weakref.ref(values), weakref.ref(result)))
    except TypeError:  # not weakly referenceable: not remembered
        pass


def _check_values(kit: Any, case: Case, result: Any) -> None:
    """Values only: shape first (nothing to compare otherwise), dtype left to dtype.preserved."""
    if _known_right(case.values, result):
        return
    shape = getattr(result, "shape", None)
    if isinstance(shape, tuple) and math.prod(shape) != case.n:  # before any copy of a result of any size
        kit.fail(
            "the result has the wrong shape, so its values cannot be compared",
            case,
            expected=f"shape ({case.n},)",
            got=f"shape {shape}",
        )
    want = oracle.expected(case.values, kit.contract)  # once: a vector may be past 32 MiB
    got = assertions.host_copy(result, want)
    if got.shape != (case.n,) and got.size == case.n:
        got = got.reshape(case.n)  # the wrong shape is result.type's finding
    if got.shape != (case.n,):
        kit.fail(
            "the result has the wrong shape, so its values cannot be compared",
            case,
            expected=f"shape ({case.n},)",
            got=f"shape {got.shape}",
        )
    if got.dtype != case.dtype:
        got = _in_dtype_of(got, case.dtype)
    bad = oracle.first_mismatch(case.values, got, kit.contract, want=want)
    del want
    if bad is None:
        if got.dtype == result.dtype:
            _note_right(case.values, result)
        return
    doubling = kit.contract.oracle is pjit_double.doubled
    name = getattr(kit.contract.oracle, "__name__", "oracle")
    hint = (
        "doubling is exact in every dtype: compute 2 * x (or x + x) in the input's own dtype"
        if doubling
        else f"the contract's oracle {name} gives another value, exactly (rtol=0, atol=0)"
    )
    if np.array_equal(oracle.bits(got), oracle.bits(case.values)):
        hint = "the result equals the input: nothing was " + ("doubled" if doubling else "computed")
    elif oracle.is_float(case.dtype) or case.dtype.kind == "c":
        with np.errstate(
            invalid="ignore"
        ):  # NaN in a narrow float casts with a warning the user need not see
            finite = np.isfinite(case.values.astype(np.complex128 if case.dtype.kind == "c" else np.float64))
        if not finite[bad.index]:
            hint = "special values (NaN, +/-inf) are not doubled as IEEE arithmetic doubles them"
        elif bad.count < case.n:
            hint = (
                f"only some elements are wrong ({bad.count} of {case.n}): look at magnitudes, signs, "
                f"zeros, or rounding through a narrower type"
            )
    what = "the input doubled" if doubling else f"the oracle's, {name}(x)"
    kit.fail(
        f"result values are not {what} ({bad.count} of {case.n} elements differ)",
        case,
        expected=f"result[{bad.index}] = {'2 * ' if doubling else name}"
        + (f"{bad.input}" if doubling else f"({bad.input})")
        + f" = {bad.expected}",
        got=f"result[{bad.index}] = {bad.got}",
        hint=hint,
    )


def _layout_hint(case: Case, result: Any) -> str:
    target = target_sharding(case.mesh)
    got_ids, want_ids = _devices(result.sharding), _devices(target)
    if got_ids != want_ids:
        if case.mesh is None and len(got_ids) == 1:
            return (
                f"result lies on device {got_ids[0]}; the target is the first device, "
                f"jax.devices()[:1] -- did you pick another device (jax.devices()[-1:])?"
            )
        if case.mesh is None:
            return (
                f"result lies on devices {got_ids}; with no mesh the target is the first device "
                f"only -- did you build the mesh from all of jax.devices()?"
            )
        return (
            f"result lies on devices {got_ids} but the mesh holds devices {want_ids}: "
            f"build the sharding from the mesh you were given"
        )
    spec = getattr(result.sharding, "spec", None)
    if spec is not None and tuple(spec) != (DATA_AXIS,):
        return (
            f"the result's partition spec is {spec}; the target is PartitionSpec('data') "
            f"(shard the vector over the 'data' axis, replicate over the others)"
        )
    got_mesh = getattr(result.sharding, "mesh", None)
    if (
        case.mesh is not None
        and got_mesh is not None
        and got_mesh.devices.shape == case.mesh.devices.shape
        and tuple(got_mesh.axis_names) != tuple(case.mesh.axis_names)
    ):
        return (
            f"the result's mesh names its axes {tuple(got_mesh.axis_names)}; the mesh given names "
            f"them {tuple(case.mesh.axis_names)} over the same devices -- is a cache keyed on the "
            f"devices alone, not the axis names?"
        )
    return (
        "the right devices but not in the mesh's order: shards must follow mesh.devices "
        "(did you sort devices or rebuild the mesh?)"
    )


def _check_layout(kit: Any, case: Case, result: Any) -> None:
    _require_array(kit, case, result)
    failed = _failure(
        lambda: assertions.assert_array_layout(result, target_sharding(case.mesh), shards=False)
    )
    if failed is not None:
        if failed.kind == "memory-kind":
            kit.fail(
                "the result is not in the device memory the target layout names",
                case,
                expected=failed.expected,
                got=failed.got,
                hint="leave the output in device memory: no memory_kind='pinned_host' or other "
                "offloading, for long vectors too",
            )
        kit.fail(
            "the result does not have the requested layout",
            case,
            expected=f"a sharding equivalent to NamedSharding({describe_mesh(case.mesh)}, P('data'))",
            got=repr(result.sharding),
            hint=_layout_hint(case, result),
        )


def _flip_bits(values: np.ndarray) -> np.ndarray:
    """Other values of the same shape and dtype: every bit inverted."""
    return (~oracle.bits(values)).reshape(-1).view(values.dtype) if values.size else values.copy()


# ---------------------------------------------------------------------------
# Gates

_SMOKE = np.arange(8, dtype=np.float32) * np.float32(0.5)


@check("call.smoke", "pjit_double(x) returns for a small float32 vector (gate)", gate=True)
def call_smoke(kit: Any, _: Case | None) -> None:
    case = Case(_SMOKE.copy())
    x, outcome = kit.call(case)
    if outcome.error is not None:
        kit.fail_raised(case, outcome.error)


@check(
    "api.mesh-keyword",
    "pjit_double accepts mesh=None and mesh=<Mesh> by keyword (gate)",
    needs_mesh=True,
    gate=True,
)
def api_mesh_keyword(kit: Any, _: Case | None) -> None:
    calls_with: tuple[tuple[MeshArg, Mesh | None], ...] = (("none", None), ("mesh", default_mesh()))
    for mesh_arg, mesh in calls_with:
        case = Case(_SMOKE.copy(), mesh, mesh_arg)
        _, outcome = kit.call(case)
        error = None if outcome.error is None else f"{type(outcome.error).__name__}: {outcome.error}"
        del outcome  # results may be huge: one alive at a time
        if error is not None:
            error = error.splitlines()[0]
            # Blame `mesh` only if the same x without it goes through.
            plain = Case(_SMOKE.copy())
            _, without = kit.call(plain)
            if without.error is not None:
                kit.fail(
                    "pjit_double raised with the mesh keyword and without it",
                    case,
                    expected="pjit_double(x) and pjit_double(x, mesh=...) to return the doubled x",
                    got=f"with mesh=: {error}; without: "
                    + one_line(f"{type(without.error).__name__}: {without.error}"),
                    hint="the failure is not about `mesh`: pjit_double(x) raises now for the small float32 "
                    "vector it doubled in call.smoke -- does an earlier call leave state behind?",
                )
            kit.fail(
                "the call with the mesh keyword raised: `mesh` is not supported",
                case,
                expected="pjit_double(x, *, mesh=None) to accept a mesh by keyword",
                got=error,
                hint="the full contract passes mesh=...; to check the exercise as written, "
                "run with --contract seed",
            )


# ---------------------------------------------------------------------------
# Result type, dtype, values


@check("result.type", "the result is a jax.Array of shape (n,)", domain=domains.ANY_CALL, examples=0.25)
def result_type(kit: Any, case: Case) -> None:
    _, result = kit.result(case, shared=True)
    _require_array(kit, case, result)
    if result.shape != (case.n,):
        kit.fail(
            "the result has the wrong shape",
            case,
            expected=f"shape ({case.n},)",
            got=f"shape {result.shape}",
            hint="doubling keeps the shape: no reshape, padding or slicing",
        )


@check(
    "dtype.preserved",
    "the result has the input's dtype",
    domain=domains.ANY_CALL,
    examples=0.25,
)
def dtype_preserved(kit: Any, case: Case) -> None:
    _, result = kit.result(case, shared=True)
    got = np.dtype(result.dtype if hasattr(result, "dtype") else np.asarray(result).dtype)
    del result  # results may be huge: one alive at a time
    if got != case.dtype:
        hint = "multiply by a Python 2 (weakly typed), not by an array or a NumPy scalar of another dtype"
        if got.itemsize > case.dtype.itemsize and oracle.is_float(got):
            hint = (
                "the result was widened: multiply by a Python 2 (weakly typed) or cast back "
                "with .astype(x.dtype); check jax_enable_x64 is not switched on"
            )
        kit.fail(
            "the result's dtype is not the input's",
            case,
            expected=str(case.dtype),
            got=str(got),
            hint=hint,
        )


@check(
    "values.float32",
    "float32 values are doubled exactly (specials, all lengths)",
    domain=domains.FLOAT32,
    examples=2,
)
def values_float32(kit: Any, case: Case) -> None:
    _, result = kit.result(case, shared=True)
    _check_values(kit, case, result)


@check(
    "values.all-dtypes",
    "every dtype in the domain is doubled exactly (integers wrap)",
    needs_mesh=True,
    domain=domains.ANY_CALL,
    examples=0.5,
)
def values_all_dtypes(kit: Any, case: Case) -> None:
    _check_values(kit, case, kit.result(case, shared=True)[1])


# ---------------------------------------------------------------------------
# Layout


@check(
    "layout.default-device",
    "without a mesh the result lies on the first device, P('data')",
    domain=domains.DEFAULT_MESH,
    examples=0.5,
)
def layout_default_device(kit: Any, case: Case) -> None:
    _, result = kit.result(case, shared=True)
    _check_layout(kit, case, result)
    del result  # results may be huge: one alive at a time
    if kit.contract.takes_mesh and not kit.in_schedule and len(jax.devices()) > 1:
        # The same call made under jax.default_device(another device): the target is still
        # jax.devices()[:1], whatever the caller's default device (drawn examples only:
        # a compile each).
        elsewhere = jax.devices()[-1]
        x = make_input(case)
        impl, kwargs = kit.impl, case.mesh_kwargs()

        def under_default_device() -> Any:
            with jax.default_device(elsewhere):
                return calls.finished(impl(x, **kwargs))

        outcome = kit.runner.run(
            f"{call_text(case)} under jax.default_device(device {elsewhere.id})", under_default_device
        )
        if outcome.error is not None:
            if may_refuse(case, outcome.error):
                raise Refused(one_line(str(outcome.error)))
            kit.fail_raised(case, outcome.error)
        result = outcome.result
        del outcome
        if isinstance(result, jax.Array) and not result.sharding.is_equivalent_to(target_sharding(None), 1):
            kit.fail(
                f"under jax.default_device(device {elsewhere.id}), the result is not on the first device",
                case,
                expected="a sharding equivalent to NamedSharding(default (first device only), P('data')): "
                "jax.devices()[:1] whatever the default device",
                got=repr(result.sharding),
                hint="build the default mesh from jax.devices()[:1], not from the default device "
                "(jax.config.jax_default_device, jnp.zeros(()).devices())",
            )


@check(
    "layout.mesh",
    "with a mesh the result is NamedSharding(mesh, P('data'))",
    needs_mesh=True,
    domain=domains.EXPLICIT_MESH,
    examples=0.5,
)
def layout_mesh(kit: Any, case: Case) -> None:
    _, result = kit.result(case, shared=True)
    _check_layout(kit, case, result)
    if case.mesh is not None and case.mesh.devices.ndim == 2 and not kit.in_schedule:
        # The same devices with the axes the other way round: 'data' may be
        # in either position, and the layout must follow it there too (drawn
        # examples only: a compile each; the schedule draws both orders anyway).
        swapped = Mesh(case.mesh.devices.T, tuple(reversed(case.mesh.axis_names)))
        other = dataclasses.replace(case, mesh=swapped)
        del result  # results may be huge: one alive at a time
        _check_layout(kit, other, kit.result(other, shared=True)[1])


@check(
    "layout.shards",
    "each addressable shard lies on its device and covers its index range",
    domain=domains.ANY_CALL,
    examples=0.25,
)
def layout_shards(kit: Any, case: Case) -> None:
    _, result = kit.result(case, shared=True)
    _require_array(kit, case, result)
    failed = _failure(lambda: assertions.assert_array_shards(result, target_sharding(case.mesh)))
    if failed is not None:
        got, want = _shard_map(result), _target_shards(case)
        kit.fail(
            failed.summary,
            case,
            expected=f"shards {dict(sorted(want.items()))} (device id -> [start, stop))",
            got=f"shards {dict(sorted(got.items()))}",
            hint=f"in the target layout {failed.expected}, in the result {failed.got}; "
            + _layout_hint(case, result),
        )


# ---------------------------------------------------------------------------
# Divisibility


@check(
    "divisibility.error",
    "a length the data axis does not divide raises ValueError, x intact",
    needs_mesh=True,
    needs_raises=True,
    domain=domains.INDIVISIBLE,
    examples=0.5,
    min_devices=2,  # a data axis of 2+ devices
)
def divisibility_error(kit: Any, case: Case) -> None:
    x, outcome = kit.call(case)
    size = data_axis_size(case.mesh)
    raises = kit.contract.raises
    if outcome.error is None:
        result = outcome.result
        kit.fail(
            "no error for a length the data axis does not divide",
            case,
            expected=f"{raises.__name__}: length {case.n} is not divisible by the data axis size {size}",
            got=f"a result of shape {getattr(result, 'shape', '?')} with "
            f"{getattr(result, 'sharding', type(result).__name__)}",
            hint="shard with NamedSharding(mesh, P('data')) as jit's in_shardings: an equal "
            "partition is impossible here, and JAX says so (padding or replicating hides it)",
        )
    if not isinstance(outcome.error, raises) and not may_refuse(case, outcome.error):
        kit.fail(
            "the wrong exception for a length the data axis does not divide",
            case,
            expected=f"a {raises.__name__}"
            + (" (JAX's IndivisibleError is one)" if raises is ValueError else ""),
            got=one_line(f"{type(outcome.error).__name__}: {outcome.error}"),
            hint="let JAX's own error through, or raise ValueError naming the length and axis size",
        )
    _assert_intact(kit, case, x)


@check(
    "divisibility.no-false-error",
    "lengths the data axis divides never raise (only 'data' counts)",
    domain=domains.SPLIT_2D,
    examples=0.5,
    min_devices=domains.SPLIT_2D_DEVICES,  # the full contract's 2-D meshes with both axes of 2+
)
def divisibility_no_false_error(kit: Any, case: Case) -> None:
    # An exception here fails with the divisibility hint; the values are values.*'s.
    kit.result(case, shared=True)


# ---------------------------------------------------------------------------
# JIT with the requested shardings


@check(
    "jit.shardings",
    "the result comes out of jax.jit with in/out shardings = the target layout",
    domain=domains.ANY_CALL,
    examples=0.5,
    needs=(selftest.JIT_SPY, selftest.JAXPR_JIT),
)
def jit_shardings(kit: Any, case: Case) -> None:
    # A real call with the real x, watched (Kit.call): the path this very input takes
    # (a NumPy array, an array already in the target layout, a 16-bit dtype) is the
    # one judged, not the path of an abstract input.
    _, outcome = kit.call(case, shared=True)
    bug = jax_bugs.hitting(case)
    if bug is not None and bug.bug:  # no jit of this JAX can do it: the result's other checks judge it
        raise jax_bugs.KnownBugHit(bug)
    if outcome.error is not None:
        if may_refuse(case, outcome.error):
            raise Refused(one_line(str(outcome.error)))
        kit.fail_raised(case, outcome.error)
    chain = list(outcome.jit_chain or [])
    executions = [ran.name for ran in outcome.executions or []]
    del outcome  # results may be huge: one alive at a time
    impl, kwargs = kit.impl, case.mesh_kwargs()
    target = target_sharding(case.mesh)
    want = (
        f"in_shardings and out_shardings equivalent to NamedSharding({describe_mesh(case.mesh)}, P('data'))"
    )
    if any(
        jit_probe.is_layout(c.in_sharding, target) and jit_probe.is_layout(c.out_sharding, target)
        for c in chain
    ):
        head = chain[0]
        if head.fed is False:  # SPEC: the doubling itself is that computation, from x's own values
            kit.fail(
                "the jit that returned the result did not compute the doubling",
                case,
                expected=want + ", given x's own (undoubled) values and returning their doubles",
                got=f"{'the executable' if head.ahead_of_time else 'jit'} {head.name!r} returned the "
                f"result, but the vector it was given is not x's values (already doubled, or changed)",
                hint="the doubling was done before that call (on the host, eagerly, or in another jit) "
                "and the jit only placed the result: compute 2 * x inside "
                "jax.jit(f, in_shardings=s, out_shardings=s), applied to x itself",
            )
        return
    # Not seen in the real call: trace it too, to say what happened instead.
    traced = kit.runner.run(
        "tracing pjit_double with jax.make_jaxpr",
        lambda: jax.make_jaxpr(lambda v: impl(v, **kwargs))(
            jax.ShapeDtypeStruct(case.values.shape, case.dtype)
        ),
    )
    if traced.error is not None:
        text = one_line(f"{type(traced.error).__name__}: {traced.error}")
        aot = "lowered and compiled" in str(traced.error)
        if not chain and aot and "compiled executable" not in executions:
            raise Inconclusive(
                f"jax.make_jaxpr cannot trace an ahead-of-time compiled executable "
                f"({text}), and a real call shows no jit execution, so whether it was compiled "
                f"with the requested shardings cannot be seen"
            )
        how = f"seen in a real call; tracing failed with {text}"
        traced_ok = False
        jaxpr = None
    else:
        jaxpr = traced.result
        trace_chain = jit_probe.output_chain(jaxpr)
        traced_ok = any(
            jit_probe.is_layout(c.in_sharding, target) and jit_probe.is_layout(c.out_sharding, target)
            for c in trace_chain
        )
        how = "seen in a real call"
    where = describe_placement(case.placement)
    if traced_ok:
        kit.fail(
            "for this input the result does not come out of jax.jit with the target layout",
            case,
            expected=want + f", for x {where} as for any other x",
            got=f"jit calls {[c.name for c in chain] or 'none'} returned it in a real call; "
            f"traced with an abstract x of this shape and dtype, jit with the target layout does",
            hint=f"this x ({where}, dtype {case.dtype}) takes another path: send every input through "
            f"the same jax.jit(f, in_shardings=s, out_shardings=s), with no eager or device_put-only path",
        )
    if not chain:
        if jaxpr is None and executions:
            names = ", ".join(sorted(set(executions)))
            got = (
                f"{len(executions)} execution(s) of compiled code ran ({names}), "
                f"but the result is not their output: it was moved or computed after them ({how})"
            )
        elif jaxpr is None:
            got = f"no jax.jit execution returned the result ({how})"
        else:
            elsewhere = list(jit_probe.jit_calls(jaxpr))
            primitives = sorted({e.primitive.name for e in jaxpr.eqns})[:8]
            got = (
                "no jit call at all, only: " + ", ".join(primitives)
                if not elsewhere
                else f"jit calls ({', '.join(c.name for c in elsewhere)}), but the result is not their output"
            )
        kit.fail(
            "the result is not computed by jax.jit",
            case,
            expected=want,
            got=got,
            hint="eager ops and jax.device_put give the right numbers but are not compiled with the "
            "requested shardings: use jax.jit(f, in_shardings=s, out_shardings=s) and return its "
            "output as it is",
        )
    inner = chain[-1]
    kit.fail(
        "jax.jit was not given the target layout",
        case,
        expected=want,
        got=f"in_shardings={jit_probe.describe(inner.in_sharding)}, "
        f"out_shardings={jit_probe.describe(inner.out_sharding)} ({how})",
        hint="pass NamedSharding(mesh, PartitionSpec('data')) as both in_shardings and out_shardings"
        + (
            " of the jax.jit you lower and compile: an executable keeps the shardings it was compiled with"
            if inner.ahead_of_time
            else ""
        ),
    )


# ---------------------------------------------------------------------------
# Hygiene


@check(
    "hygiene.input-intact",
    "the caller's x is neither deleted nor changed",
    domain=domains.ANY_CALL,
    examples=0.25,
)
def hygiene_input_intact(kit: Any, case: Case) -> None:
    x = kit.call(case, shared=True)[0]  # x must be intact whether the call returns or raises
    _assert_intact(kit, case, x)


def _other_mesh(case: Case) -> Mesh:
    """A mesh of the same shape as the case's, on other devices or in another order."""
    if case.mesh is None or case.mesh.devices.size == 1:
        return Mesh(np.array(jax.devices()[-1:]), (DATA_AXIS,))
    return Mesh(
        case.mesh.devices[::-1, ...] if case.mesh.devices.ndim == 1 else case.mesh.devices[::-1, ::-1],
        case.mesh.axis_names,
    )


def _fitting(placement: Any, n: int) -> Any:
    """``placement`` for a vector of length ``n``: split over devices that do not divide it, replicated."""
    if placement[0] == "sharded" and placement[2] == "split" and n % len(placement[1]):
        return ("sharded", placement[1], "replicated")
    return placement


def _mesh_neighbours(mesh: Mesh) -> list[Mesh]:
    """Meshes a cache keyed on too little confuses with ``mesh``: the same flat device ids in
    another shape, the axes in the other order, the same shape from the same first device
    over other devices, and the same shape over other devices."""
    devices = list(mesh.devices.flat)
    size = len(devices)
    found: list[Mesh] = []
    if mesh.devices.ndim == 1 and size >= 4 and size % 2 == 0:
        found.append(Mesh(np.array(devices).reshape(2, size // 2), (DATA_AXIS, OTHER_AXIS)))
    elif mesh.devices.ndim == 2:
        found.append(Mesh(np.array(devices), (DATA_AXIS,)))
        found.append(Mesh(mesh.devices.T, tuple(reversed(mesh.axis_names))))
    rest = [d for d in jax.devices() if d not in devices[1:] and d != devices[0]]
    if size >= 2 and rest:
        others = [devices[0], *rest, *devices[1:]][:size]
        found.append(Mesh(np.array(others).reshape(mesh.devices.shape), mesh.axis_names))
    elif size >= 3:  # every device in the mesh: the same first device, the others in reverse order
        others = [devices[0], *reversed(devices[1:])]
        found.append(Mesh(np.array(others).reshape(mesh.devices.shape), mesh.axis_names))
    found.append(_other_mesh(Case(np.zeros(0), mesh, "mesh")))
    return found


# Calls in sequence: these checks make their own calls, on earlier checks' inputs
# as well (warm, so that only the calls that differ compile).


@check(
    "hygiene.no-stale-results",
    "later calls never get an earlier call's result back",
    domain=domains.HISTORY_STALE,
    examples=0.25,  # state.histories searches longer histories of calls too
)
def hygiene_no_stale_results(kit: Any, case: Case) -> None:
    # Follow-ups that a cache keyed on too little confuses with the first call: other
    # values in an array that may reuse the first x's id() and host buffer (the first x
    # is freed before the next is made), a mesh that shares something with the case's
    # (flat device ids, shape, first device), another dtype.
    flipped = dataclasses.replace(case, values=_flip_bits(case.values))
    follow_ups = [flipped]  # same shape/dtype/mesh
    if kit.contract.takes_mesh:
        if case.mesh is None:
            meshes = [_other_mesh(case)]
        else:
            neighbours = _mesh_neighbours(case.mesh)
            # The schedule's four cells of a mesh kind (domains.HISTORY_STALE) take one each.
            cell = coverage.cell_of(case)
            pick = 2 * (cell.placement == "uncommitted") + (cell.length == "long")
            if not kit.in_schedule:
                pick = zlib.crc32(f"{case.n}/{case.dtype}/{case.placement}".encode())
            meshes = [neighbours[pick % len(neighbours)]]
        for mesh in meshes:
            n = case.n - case.n % data_axis_size(mesh)
            follow_ups.append(Case(flipped.values[:n], mesh, "mesh", _fitting(flipped.placement, n)))
        other = np.dtype("int32") if case.dtype != np.dtype("int32") else np.dtype("float32")
        real = case.values.real if case.dtype.kind == "c" else case.values
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf cast to int32: any value will do
            follow_ups.append(dataclasses.replace(case, values=real.astype(other)))
    x, first = kit.result(case)
    if not _is_right(kit, case, first):
        return  # a wrong first result is another check's finding; staleness needs a right one
    steps: list[tuple[Case, Any]] = []
    if isinstance(x, np.ndarray) and x.flags.writeable and case.n:
        x[...] = flipped.values  # the caller's own buffer, rewritten in place, and passed again
        steps.append((flipped, x))
    del x  # freed: a later x may take its id() and its place in memory
    steps += [(later, None) for later in follow_ups]
    result: Any = None
    while steps:
        later, given = steps.pop(0)
        result = None  # results may be huge: the previous one is dropped before the next call
        _, result = kit.result(later, given)  # an exception here fails the check: the first did not raise
        del given
        if not isinstance(result, jax.Array) or result.shape != (later.n,):
            continue  # not the earlier result (that has this shape): result.type's finding
        got = np.dtype(result.dtype)
        hint = (
            "a cache keyed on too little (the length only? the mesh's shape only?) hands back an "
            "earlier call's result or function; key on everything the result depends on"
        )
        now = assertions.host_copy(result, oracle.expected(later.values, kit.contract))
        earlier = assertions.host_copy(first, oracle.expected(case.values, kit.contract))
        # The earlier result itself, bit for bit, where another was due.  (An empty
        # vector of the earlier dtype says nothing: a dtype defect looks the same.)
        if got == first.dtype and later.n and np.array_equal(oracle.bits(now), oracle.bits(earlier)):
            bad = oracle.first_mismatch(later.values, now, kit.contract) if got == later.dtype else None
            if got != later.dtype or bad is not None:
                kit.fail(
                    "a later call returned the earlier call's result",
                    later,
                    expected=f"result[{bad.index}] = 2 * {bad.input} = {bad.expected}"
                    if bad is not None
                    else f"a result of dtype {later.dtype}",
                    got=f"result[{bad.index}] = {bad.got}, the earlier call's element"
                    if bad is not None
                    else f"the earlier call's result, of dtype {got}",
                    hint=hint,
                )
        if got != later.dtype:
            continue  # a dtype of its own: dtype.preserved's finding
        target = target_sharding(later.mesh)
        if not result.sharding.is_equivalent_to(target, 1) and result.sharding.is_equivalent_to(
            first.sharding, 1
        ):
            kit.fail(
                "a later call with another mesh came back in the earlier call's layout",
                later,
                expected=f"NamedSharding({describe_mesh(later.mesh)}, P('data')) or an equivalent",
                got=f"{result.sharding!r}, the layout of the call before",
                hint=hint,
            )


def _is_right(kit: Any, case: Case, result: Any) -> bool:
    """Does ``result`` pass every check of one call (type, shape, dtype, values, layout)?"""
    if not isinstance(result, jax.Array) or result.shape != (case.n,) or result.dtype != case.dtype:
        return False
    if not result.sharding.is_equivalent_to(target_sharding(case.mesh), 1):
        return False
    if _known_right(case.values, result):
        return True
    want = oracle.expected(case.values, kit.contract)
    right = (
        oracle.first_mismatch(case.values, assertions.host_copy(result, want), kit.contract, want=want)
        is None
    )
    if right:
        _note_right(case.values, result)
    return right


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


@check(
    "hygiene.global-state",
    "a call leaves JAX's configuration and mesh context as it found them",
    domain=domains.HISTORY_STATE,
    examples=0.25,
    needs=(selftest.GLOBAL_STATE,),
)
def hygiene_global_state(kit: Any, case: Case) -> None:
    judge_global_state(kit, case)


def judge_global_state(kit: Any, case: Any) -> None:
    """One call (a ``Case``, or a declared contract's ``Call``) leaves JAX's configuration and mesh
    context as the call before it found them, and as the session's first call found them: the
    judgement of ``hygiene.global-state`` and ``fn.global-state``."""
    before = kit.runner.run("reading JAX's configuration", calls.global_state).result
    kit.result(case)
    after = kit.runner.run("reading JAX's configuration", calls.global_state).result
    hint = (
        "use context managers (with jax.default_device(...), with jax.set_mesh(...)) or "
        "pass shardings explicitly; never jax.config.update inside the function"
    )
    changed = _changed(before, after)
    if changed:
        name = changed[0]
        kit.fail(
            f"the call changed global state ({len(changed)} setting(s): {', '.join(changed[:5])})",
            case,
            expected=f"{name} = {before.get(name)}",
            got=f"{name} = {after.get(name)}",
            hint=hint,
        )
    # A change made once, by an earlier call, is still a change: compare with
    # the state before the session's first call too.
    initial = getattr(kit.runner, "initial_state", None) or before
    changed = _changed(initial, after)
    if changed:
        name = changed[0]
        kit.fail(
            f"an earlier call changed global state and left it so ({len(changed)} setting(s): "
            f"{', '.join(changed[:5])}); this call found it already changed",
            case,
            expected=f"{name} = {initial.get(name)} (as before the first call of the session)",
            got=f"{name} = {after.get(name)}",
            hint=hint,
        )


# ---------------------------------------------------------------------------
# Inputs and compilation (full contract)


@check(
    "inputs.placements",
    "NumPy, uncommitted, single-device and sharded inputs are all accepted",
    needs_mesh=True,
    domain=domains.ANY_CALL,
    examples=0.25,
)
def inputs_placements(kit: Any, case: Case) -> None:
    # Judged against the same call with an uncommitted x: what goes wrong for
    # that one too is another check's finding (values, layout), not the input's.
    base_right = True
    if case.placement != UNCOMMITTED:
        base = dataclasses.replace(case, placement=UNCOMMITTED)
        _, outcome = kit.call(base, shared=True)
        if outcome.error is not None:
            return  # it raises for the plainest input too: not about placements
        base_right = _is_right(kit, base, outcome.result)
        del outcome  # results may be huge: one alive at a time
    _, result = kit.result(case, shared=True)  # raising for this kind of input fails the check
    if base_right:
        _check_values(kit, case, result)
        _check_layout(kit, case, result)


@check(
    "compile.once",
    "a second call with the same shape, dtype and mesh compiles nothing",
    needs_mesh=True,
    domain=domains.HISTORY_COMPILE,
    examples=0.25,
    needs=(selftest.COMPILE_COUNT,),
)
def compile_once(kit: Any, case: Case) -> None:
    # A history of calls, twice over: this input (A), the same values on another mesh
    # (B), A with x placed another way (A'), A in another dtype (C).  The second round
    # sees no (shape, dtype, mesh) that the first did not: a compile there is the
    # implementation's.  A cache of one entry, or keyed on the placement or on the
    # last dtype, recompiles in every call of it; JAX's own caches may, once (an entry
    # evicted with a garbage-collected object): two compiles or more fail the check.
    flipped = _flip_bits(case.values)
    other_placement = ("numpy",) if case.placement == UNCOMMITTED else UNCOMMITTED
    mesh_b = _other_mesh(case)
    n_b = case.n - case.n % data_axis_size(mesh_b)
    other = np.dtype("int32") if case.dtype != np.dtype("int32") else np.dtype("float32")
    real = case.values.real if case.dtype.kind == "c" else case.values
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf cast to int32: any value will do
        in_other_dtype = real.astype(other)
    history = [
        case,
        Case(case.values[:n_b], mesh_b, "mesh", _fitting(case.placement, n_b)),
        dataclasses.replace(case, values=flipped, placement=other_placement),
        dataclasses.replace(case, values=in_other_dtype),
    ]
    for step in history:  # the first round: anything may compile
        kit.result(step, make_input(step))
    compiled: list[tuple[Case, int]] = []
    for step in history:
        x = make_input(step)  # made before the call: only the call's compiles count
        _, outcome = kit.call(step, x)
        if outcome.error is not None:
            if may_refuse(step, outcome.error):
                raise Refused(one_line(str(outcome.error)))
            kit.fail_raised(step, outcome.error)
        if outcome.compiles:
            compiled.append((step, outcome.compiles))
        del outcome, x  # results may be huge: one alive at a time
    if len(compiled) >= 2:
        kit.fail(
            "calls with a shape, dtype and mesh already seen compiled again",
            compiled[0][0],
            expected="0 backend compiles in the second round of calls (A, B, A', C: all seen in the first)",
            got="; ".join(f"{n} compile(s) for {c.describe()}" for c, n in compiled),
            hint="build the jitted function once per mesh and keep it, whatever came in between (other "
            "meshes, dtypes, placements): a cache of one entry, a new lambda or a new jax.jit(...) per "
            "call recompiles",
        )


# ---------------------------------------------------------------------------
# The implementation's state: histories of calls searched by Hypothesis (history.py)


@dataclasses.dataclass
class _Held:
    """What the caller of a history holds: each judged call's executions of compiled code and
    what each was given (jit_probe.Ran), and its result with a host copy of the values it had
    when judged (None for a call that raised), in call order."""

    arguments: list[list[Any]] = dataclasses.field(default_factory=list)
    results: list[tuple[Any, np.ndarray] | None] = dataclasses.field(default_factory=list)

    def clear(self) -> None:
        self.arguments.clear()
        self.results.clear()

    def add(self, executions: list[Any], result: tuple[Any, np.ndarray] | None) -> None:
        self.arguments.append(executions)
        self.results.append(result)
        if len(self.results) > history.HELD:  # the caller keeps its last few results only
            self.results[-history.HELD - 1] = None


def _raised_as_declared(kit: Any, case: Case, error: BaseException | None) -> None:
    """A history's call of a length the data axis does not divide: the contract's error, x intact."""
    raises = kit.contract.raises
    if error is None or not (isinstance(error, raises) or may_refuse(case, error)):
        got = "a result" if error is None else one_line(f"{type(error).__name__}: {error}")
        kit.fail(
            "a call of a length the data axis does not divide did not raise the contract's error",
            case,
            expected=f"{raises.__name__}: length {case.n} is not divisible by the data axis size "
            f"{data_axis_size(case.mesh)}",
            got=got,
            hint="let JAX's own error through (jit's in_shardings over the mesh's data axis), "
            "whatever calls came before",
        )


def _assert_held_intact(kit: Any, case: Case, held: _Held) -> None:
    """Every earlier result the caller still holds is neither deleted nor changed by this call."""
    for k, kept in enumerate(held.results, 1):
        if kept is None:
            continue
        failed = _failure(
            partial(assertions.assert_input_intact, kept[1], kept[0], what=f"result of call {k}")
        )
        if failed is not None:
            kit.fail(
                f"the result of call {k}, still held by the caller, was {failed.kind} by a later call",
                case,
                expected=failed.expected,
                got=failed.got,
                hint="a result belongs to the caller: never donate it or write into it later, even "
                "when it comes back as x (y = f(y), f(f(x))) or is the last array you returned",
            )


def _history_step(kit: Any, earlier: list[Case], case: Case, held: _Held) -> bool:
    """Call once, after ``earlier``, and judge the call; False where it was not judged.
    ``held``: what the caller holds from those calls (``_Held``), this call's appended here."""
    if not earlier:
        held.clear()  # a new history
    if case.placement[0] == "result":  # an earlier result passed back: x is that very array
        kept = held.results[case.placement[1] - 1]
        assert kept is not None, "history.py passes back only results"
        x = kept[0]
        case = dataclasses.replace(case, values=kept[1])
    else:
        x = make_input(case)
    kit.history = [*earlier, case]  # what a failure prints, and its rerun command replays
    if kit.runner.call_log is not None:  # what the watchdog names if this call hangs or crashes
        kit.runner.label = (
            kit.running or kit.check_id,
            f"call {len(earlier) + 1} of a history of calls: {case.describe()}",
            kit.rerun_command(case),
        )
    try:
        _, outcome = kit.call(case, x, watch_jit=True)
    except jax_bugs.KnownBugHit as hit:
        kit.not_judged(hit, None)  # counted in the verdict; a history step has no cell of its own
        return False  # JAX's own bug: not the implementation's (jax_bugs.py)
    if history.indivisible(case):
        _raised_as_declared(kit, case, outcome.error)
        del outcome
        _assert_intact(kit, case, x)
        _assert_held_intact(kit, case, held)
        held.add([], None)
        return True  # a call of the history: what comes after it is judged after it
    if outcome.error is not None:
        if may_refuse(case, outcome.error):
            _assert_intact(kit, case, x)
            return False
        kit.fail_raised(case, outcome.error)
    _assert_intact(kit, case, x)  # deleted (donated) or changed at some depth of the history fails too
    _assert_held_intact(kit, case, held)
    del x
    result = outcome.result
    compiled = [name for name in outcome.compiled if not internals.is_jax_move(name)]  # JAX's: not counted
    executions = list(outcome.executions or [])
    del outcome
    _check_values(kit, case, result)  # an earlier call's result handed back fails here
    if getattr(result, "dtype", None) != case.dtype:
        kit.fail(
            "the result's dtype is not the input's",
            case,
            expected=f"dtype {case.dtype}",
            got=f"dtype {getattr(result, 'dtype', None)}",
            hint="keep the input's dtype: no cast, and no jitted function shared between dtypes",
        )
    _check_layout(kit, case, result)
    key = history.call_key(case)
    # JAX's jit keys its executables on the call's context too (the default device, the mesh).
    same = [
        k for k, step in enumerate(earlier, 1) if history.call_key(step) == key and step.under == case.under
    ]
    held.add(executions, (result, assertions.host_copy(result, oracle.expected(case.values, kit.contract))))
    arguments = held.arguments
    if (
        compiled
        and same
        and not jit_probe.compile_allowed(compiled, arguments[-1], [arguments[k - 1] for k in same])
    ):
        kit.fail(
            "a call whose shape, dtype and mesh came earlier in the history compiled again",
            case,
            expected=f"0 backend compiles: call {same[-1]} had this shape, dtype and mesh "
            f"({len(earlier) - same[-1]} call(s) between them)",
            got=f"{len(compiled)} backend compile(s): {', '.join(compiled[:3])}",
            hint=_recompiled_hint(earlier[same[-1] - 1 :], case),
        )
    return True


def _recompiled_hint(since: list[Case], case: Case) -> str:
    """Why a seen (shape, dtype, mesh) may have compiled again, from the calls since its last call
    (``since[0]``)."""
    said = []
    if any(history.indivisible(step) for step in since):
        said.append(
            "a call between them raised (a length the data axis does not divide): an error must not "
            "drop or rebuild the mesh's jitted function"
        )
    if case.clocks_ahead > since[0].clocks_ahead:
        said.append(
            "time passed between them (the clocks it reads jumped ahead): a cache that drops "
            "entries left idle for a while compiles again"
        )
    said.append(
        "keep the jitted function (or executable) of every mesh and dtype seen: a cache that evicts "
        "(lru_cache(maxsize=...), the last few meshes), one keyed on the placement, the values or "
        "id(x), or a jax.jit made per call compiles again (JAX's own programs for moving x are not counted)"
    )
    return "; ".join(said)


@check(
    "state.first-call",
    "a fresh process whose first call runs under a context (jax.default_device, jax.set_mesh), "
    "then plain calls: every call right, as in a history",
    needs_mesh=True,
    min_devices=2,
    needs=(selftest.COMPILE_COUNT, selftest.JIT_SPY),
    history=True,
)
def state_first_call(kit: Any, token: str | None) -> None:
    # Each history in a fresh process (running/fresh.py), which makes it from the run's seed with
    # its own devices (across processes, a fresh process is a single one) or replays the token.
    if token is not None:
        histories = [decode_history(token)]
        jobs: list[dict[str, Any]] = [{"token": token}]
    else:
        histories = history.first_calls(contract=kit.contract, seed=kit.schedule.seed)
        jobs = [{"seed": kit.schedule.seed, "index": k} for k in range(len(histories))]
    kit.judge_fresh(histories, jobs)


def replay_first_calls(kit: Any, steps: list[Case]) -> None:
    """In the fresh process: ``steps``, its first call this process's first, judged as a history's."""
    history.replay(partial(_history_step, kit, held=_Held()), steps)


@check(
    "state.histories",
    "histories of calls searched by Hypothesis: every call right, none stale, "
    "a seen (shape, dtype, mesh) compiles nothing",
    needs_mesh=True,
    examples=0.3125,  # 5 histories at the default profile: each new mesh compiles
    needs=(selftest.COMPILE_COUNT, selftest.JIT_SPY),  # the spy: what each call's jit was given
    history=True,
)
def state_histories(kit: Any, token: str | None) -> None:
    held = _Held()

    def judge(earlier: list[Case], case: Case) -> bool:
        if kit.cluster is None:
            return _history_step(kit, earlier, case, held)
        # --distributed: every process agrees on each step's verdict (Kit._step), so that every
        # process's Hypothesis sees a failure at the same step and shrinks in lockstep.
        judged: list[bool] = []
        kept = len(held.results)
        kit._step(case, lambda: judged.append(_history_step(kit, earlier, case, held)))
        # One history everywhere: a step is part of it only where every process judged it (JAX's
        # own bugs may keep one process from judging it: jax_bugs.py).
        if all(kit.cluster.agree(int(bool(judged and judged[0])))):
            return True
        del held.arguments[kept:], held.results[kept:]
        return False

    reach = history.HistoryReach()
    try:
        if token is not None:
            history.replay(judge, decode_history(token))
            return
        planned = history.planned(
            contract=kit.contract,
            x64=bool(jax.config.read("jax_enable_x64")),
            seed=kit.schedule.seed,
        )
        for steps in planned:  # depth on one key, ids that join alike: every run, not by chance
            history.replay(judge, steps)
            reach.count_planned(steps)
        try:
            history.search(
                judge,
                reach,
                contract=kit.contract,
                options=kit.hypothesis_options(CHECKS["state.histories"]),
                shrink_seconds=kit.shrink_seconds,
                x64=bool(jax.config.read("jax_enable_x64")),
            )
        except BaseExceptionGroup as group:
            # Hypothesis calls a failure flaky when its replay passes: the implementation's state
            # left by the histories before it changed the outcome.  The failure stands; its rerun
            # replays the history in a fresh process.
            first = failure_in(group)
            if first is None:
                raise
            raise first from None
    finally:
        kit.history = None
        held.clear()
        record = kit.records.get("state.histories")
        if record is not None and reach.histories:
            record.histories = reach.as_dict()
            record.examples = reach.histories
