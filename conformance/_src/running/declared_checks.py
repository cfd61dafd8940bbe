"""The checks of a declared contract: each one judgement of the kit, generic over the contract.

Registered in the one catalogue (contract/catalogue.py) as ``declared`` checks, run by the
engine (kit.py) on inputs drawn from the contract (declared/draw.py), judged with the
library's assertions.  A body returns how many examples it judged; one that has nothing to judge
in this contract raises ``NotApplicable`` saying why.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from conformance._src import internals, selftest
from conformance._src.calling import calls as calling
from conformance._src.calling.calls import Outcome
from conformance._src.contract.catalogue import KitError, NotApplicable, check
from conformance._src.contract.checks import judge_global_state, judge_numpy_kept
from conformance._src.contract.messages import one_line
from conformance._src.declared import draw
from conformance._src.declared import history as declared_history
from conformance._src.declared.contract import (
    MESH_FROM_INPUTS,
    MESH_KEYWORD,
    NUMPY,
    ContractError,
    is_itself,
    signature_problem,
    tolerance_for,
)
from conformance._src.declared.draw import LAYOUTS, Call, Placed
from conformance._src.library import jit_probe, values
from conformance._src.library.assertions import (
    AssertionFailed,
    assert_input_intact,
    assert_jit_shardings,
    assert_layout,
    assert_values_close,
    assert_values_equal,
    host_copy,
)
from conformance._src.library.jit_probe import Ran
from conformance._src.library.show import mesh_text
from conformance._src.library.values import flush_subnormals
from conformance._src.running.kit import Kit


def _is_spec(value: Any) -> bool:
    return isinstance(value, PartitionSpec)


def targets(call: Call) -> Any:
    """The result's layouts: the contract's ``out`` specs over the call's mesh (the first device's
    alone where the function is given none)."""
    mesh = call.mesh
    return jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), call.contract.out, is_leaf=_is_spec)


def expected_dtypes(call: Call, expected: Any) -> Any:
    """The dtype rule: the contract's ``dtype`` of the input dtypes, else the first input's dtype."""
    rule = call.contract.dtype
    if rule is None:
        first = call.hosts[0].dtype
        return jax.tree_util.tree_map(lambda _: first, expected)
    given = rule(*[h.dtype for h in call.hosts])
    if isinstance(given, (str, np.dtype, type)):
        dtype = np.dtype(jax.numpy.dtype(given))
        return jax.tree_util.tree_map(lambda _: dtype, expected)
    return jax.tree_util.tree_map(lambda d: np.dtype(jax.numpy.dtype(d)), given)


def expected_of(call: Call, *, flushed: bool = False, by: Any = None) -> Any:
    """The oracle's result for the call's values (``by``: one of the contract's ``accept``
    instead, None where it adds nothing), each leaf in the dtype the rule gives; ``flushed``: for
    the values with every subnormal made zero, as XLA on CPU reads them."""
    hosts = [flush_subnormals(h) if flushed else np.array(h) for h in call.hosts]
    with np.errstate(all="ignore"):  # an oracle's overflow is its answer (inf), not a warning of the run
        raw = (by or call.contract.oracle)(*hosts, **dict(call.contract.keywords))
    if raw is None:
        return None
    raw = jax.tree_util.tree_map(np.asarray, raw)
    dtypes = expected_dtypes(call, raw)
    return jax.tree_util.tree_map(lambda v, d: np.asarray(v).astype(d), raw, dtypes)


def reference_of(kit: Kit, call: Call) -> Any:
    """``oracle=ITSELF``: the function's own result for the call's values on one device -- a mesh
    of this process's first device alone, each of the contract's axes of size 1 -- each leaf in
    the dtype the rule gives.  Called once per distinct values (``Kit.references``)."""
    key = tuple((h.dtype.str, h.shape, h.tobytes()) for h in call.hosts)
    if key in kit.references:
        return kit.references[key]
    contract = call.contract
    mesh = Mesh(np.array(jax.local_devices()[:1]).reshape((1,) * len(contract.mesh_axes)), contract.mesh_axes)
    placed = tuple(
        Placed(NUMPY)
        if NUMPY in arg.placements and contract.mesh != MESH_FROM_INPUTS
        else Placed(LAYOUTS, arg.layouts[0])
        for arg in contract.arguments
    )
    one = Call(contract, mesh, call.hosts, placed)
    _, outcome = kit.call(one)
    if outcome.error is not None:
        kit.fail(
            "the call on one device (the contract's reference, oracle=ITSELF) raised an exception",
            one,
            expected="a result: the function's own, on one device, is what every mesh must give",
            got=one_line(f"{type(outcome.error).__name__}: {outcome.error}"),
            hint="the function must take the contract's inputs on a mesh of one device too",
        )
    raw = jax.tree_util.tree_map(np.asarray, outcome.result)
    dtypes = expected_dtypes(call, raw)
    found = jax.tree_util.tree_map(lambda v, d: np.asarray(v).astype(d), raw, dtypes)
    if len(kit.references) >= 256:
        kit.references.clear()
    kit.references[key] = found
    return found


def _judge(kit: Kit, call: Call, assertion: Any) -> None:
    try:
        assertion()
    except AssertionFailed as failed:
        kit.fail(failed.summary, call, expected=failed.expected, got=failed.got, hint=failed.hint)


def _host(leaf: Any, expected: np.ndarray) -> Any:
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        # Across processes: this process judges its own shards (the rest as expected; theirs judge them).
        leaf = host_copy(leaf, expected.astype(leaf.dtype) if leaf.shape == expected.shape else None)
    if isinstance(leaf, jax.Array) and leaf.dtype == expected.dtype:
        return leaf  # the library's diagnosis reads its shards
    return np.asarray(leaf).astype(expected.dtype) if hasattr(leaf, "dtype") else leaf


def _has_subnormals(call: Call) -> bool:
    return any(not np.array_equal(values.bits(flush_subnormals(h)), values.bits(h)) for h in call.hosts)


def tolerance_of(call: Call, name: str) -> Any:
    """The contract's ``rtol`` or ``atol`` for this call's values; a function of them that gives no
    tolerance is the contract's fault, not the function's (a kit error naming it)."""
    try:
        return tolerance_for(getattr(call.contract, name), call.hosts[0].dtype, call.hosts)
    except ContractError as exc:
        raise KitError(f"conformance: the contract's {name} cannot judge {call.describe()}: {exc}") from None


def judge_values(kit: Kit, call: Call, result: Any, hint: str | None = None) -> None:
    """The result's values against the contract's oracle; ``hint``: what fits this call better
    than the comparison's own hint, where the history says why the values may be wrong."""
    itself = is_itself(call.contract.oracle)
    if itself:  # the function's own result on one device: XLA reads subnormals alike there
        expected, alternatives = reference_of(kit, call), []
    else:
        expected = expected_of(call)
        # XLA on CPU reads a subnormal input as zero: the oracle of those values is right too; and
        # each other result the contract accepts (accept=), element by element.
        flushes = (False, True) if _has_subnormals(call) else (False,)
        alternatives = [expected_of(call, flushed=True)] if _has_subnormals(call) else []
        for other in call.contract.accept:
            alternatives += [expected_of(call, flushed=f, by=other) for f in flushes]
        alternatives = [a for a in alternatives if a is not None]
    got = result
    if str(jax.tree_util.tree_structure(result)) == str(jax.tree_util.tree_structure(expected)):
        got = jax.tree_util.tree_map(_host, result, expected)
    rtol, atol = tolerance_of(call, "rtol"), tolerance_of(call, "atol")
    # No tolerance at all: bit for bit, as assert_values_equal judges (zeros keep their sign).
    exact = all(isinstance(t, (int, float)) and not isinstance(t, bool) and t == 0 for t in (rtol, atol))
    try:
        (assert_values_equal if exact else assert_values_close)(
            got, expected, rtol=rtol, atol=atol, alternatives=alternatives
        )
    except AssertionFailed as failed:
        if not itself:
            kit.fail(failed.summary, call, expected=failed.expected, got=failed.got, hint=hint or failed.hint)
        kit.fail(
            failed.summary,
            call,
            expected=f"the function's own result on one device (oracle=ITSELF): {failed.expected}",
            got=failed.got,
            hint="this mesh gives another result than one device does: "
            + (
                failed.hint
                or "look at what the shards compute apart (a collective missing or over the wrong "
                "axis, a shard's share of the input)"
            ),
        )


def _no_mesh_hint(call: Call) -> str | None:
    """Where the function was given no mesh, what its result's layout is."""
    if call.given == draw.GIVEN_MESH:
        return None
    return (
        "given no mesh (mesh=None, or none at all), the result lies on the first device, "
        "jax.devices()[0], alone, whatever jax.default_device says: not on the devices the "
        "arguments came on, nor on a mesh or device kept from an earlier call"
    )


def judge_layout(kit: Kit, call: Call, result: Any) -> None:
    try:
        assert_layout(result, targets(call))
    except AssertionFailed as failed:
        hint = _no_mesh_hint(call) or failed.hint
        kit.fail(failed.summary, call, expected=failed.expected, got=failed.got, hint=hint)


def judge_intact(kit: Kit, call: Call, arguments: list[Any]) -> None:
    """Each argument the caller handed over: neither deleted nor changed, and a NumPy one keeps
    its dtype (byte order included), its writeable flag and its shape."""
    every = zip(call.contract.arguments, call.hosts, arguments, call.placements, strict=True)
    for arg, host, given, placed in every:
        if placed.kind == NUMPY and isinstance(given, np.ndarray):
            judge_numpy_kept(kit, call, placed.make(host, call.mesh), given, arg.name)
        _judge(kit, call, lambda h=host, g=given, n=arg.name: assert_input_intact(h, g, what=n))


@check(
    "fn.signature",
    "the function can be called as the contract calls it: its arguments in order, mesh= where "
    "the contract hands one over, its keywords (gate)",
    declared=True,
    gate=True,
)
def fn_signature(kit: Kit, _: None) -> int:
    contract = kit.contract
    problem = signature_problem(contract, kit.impl)
    if problem is None:
        return 1
    called, __, why = problem.partition(": ")  # "f(x, mesh=...)", then Python's TypeError
    takes_mesh = contract.mesh == MESH_KEYWORD and "mesh" in why
    kit.fail(
        "the function cannot be called as the contract calls it",
        None,
        expected=f"{called}: the contract's arguments in its order"
        + (", the mesh by keyword" if contract.mesh == MESH_KEYWORD else ""),
        got=f"{kit.spec}: {why}",
        hint="take the mesh by keyword, def f(x, *, mesh): each call hands it over"
        + (" (mesh=None, or none at all, where mesh_optional)" if contract.mesh_optional else "")
        if takes_mesh
        else "take the contract's arguments in its order, and each of its keywords",
    )


@check("fn.values", "the result equals the oracle's within the contract's tolerance", declared=True)
def fn_values(kit: Kit, _: None) -> int:
    def body(call: Call) -> None:
        _, result = kit.result(call)
        judge_values(kit, call, result)

    return kit.search(partial(draw.calls, kit.contract), body)


@check("fn.dtype", "each result keeps the dtype the contract's rule gives", declared=True)
def fn_dtype(kit: Kit, _: None) -> int:
    def body(call: Call) -> None:
        _, result = kit.result(call)
        want = expected_dtypes(call, result if is_itself(call.contract.oracle) else expected_of(call))
        got_leaves = jax.tree_util.tree_leaves(result)
        want_leaves = jax.tree_util.tree_leaves(want)
        for k, (got, dtype) in enumerate(zip(got_leaves, want_leaves, strict=False)):
            if getattr(got, "dtype", None) != dtype:
                kit.fail(
                    "the result has another dtype",
                    call,
                    expected=f"result leaf {k} of dtype {dtype.name}",
                    got=f"dtype {getattr(got, 'dtype', type(got).__name__)}",
                    hint="compute in the input's dtype, or declare the rule (Contract(dtype=...))",
                )

    return kit.search(partial(draw.calls, kit.contract), body, share=0.5)


@check("fn.layout", "each result is laid out as the contract's out spec says, shard by shard", declared=True)
def fn_layout(kit: Kit, _: None) -> int:
    def body(call: Call) -> None:
        _, result = kit.result(call)
        judge_layout(kit, call, result)

    return kit.search(partial(draw.calls, kit.contract), body)


@check(
    "fn.jit",
    "each result came out of jax.jit with the contract's out shardings, computed there from the arguments",
    declared=True,
    needs=(selftest.JIT_SPY, selftest.JAXPR_JIT),
)
def fn_jit(kit: Kit, _: None) -> int:
    def body(call: Call) -> None:
        args, kwargs, impl, want = call.arguments(), call.keywords(), kit.impl, targets(call)
        outcome = kit.run(
            call,
            lambda: calling.finished(
                assert_jit_shardings(impl, *args, in_shardings=None, out_shardings=want, **kwargs)
            ),
        )
        if isinstance(outcome.error, AssertionFailed):
            failed = outcome.error
            kit.fail(failed.summary, call, expected=failed.expected, got=failed.got, hint=failed.hint)
        if outcome.error is not None:
            kit.fail_raised(call, outcome.error)

    return kit.search(partial(draw.calls, kit.contract), body, share=0.5)


@check("fn.input-intact", "the caller's arguments are neither deleted nor changed by a call", declared=True)
def fn_input_intact(kit: Kit, _: None) -> int:
    def body(call: Call) -> None:
        args, outcome = kit.call(call)
        judge_intact(kit, call, args)  # a refusal it may make too leaves the arguments as they were
        if outcome.error is not None:
            kit.fail_raised(call, outcome.error)

    return kit.search(partial(draw.calls, kit.contract), body, share=0.5)


@check(
    "fn.global-state",
    "a call leaves JAX's configuration and mesh context as it found them",
    declared=True,
    needs=(selftest.GLOBAL_STATE,),
)
def fn_global_state(kit: Kit, _: None) -> int:
    return kit.search(partial(draw.calls, kit.contract), partial(judge_global_state, kit), share=0.25)


@check("fn.raises", "an input the layouts do not divide raises the contract's error", declared=True)
def fn_raises(kit: Kit, _: None) -> int:
    contract = kit.contract
    if contract.raises is None:
        raise NotApplicable(
            "the contract declares no error for inputs its layouts do not divide (raises=None)"
        )
    if contract.mesh != MESH_KEYWORD or NUMPY not in contract.first.placements:
        raise NotApplicable(
            "such an input reaches the function only as a NumPy array with mesh=, which this contract "
            "does not give (mesh='inputs', or no 'numpy' placement for the first argument)"
        )
    if all(entry is None for entry in tuple(contract.first.layouts[0])):
        raise NotApplicable("the first argument's first layout splits nothing")
    error_type = contract.raises

    def body(call: Call) -> None:
        _, outcome = kit.call(call)
        if outcome.error is None:
            kit.fail(
                f"the call returned instead of raising {error_type.__name__}",
                call,
                expected=f"{error_type.__name__}: {contract.first.layouts[0]} does not divide the shape",
                got=f"a result ({type(outcome.result).__name__})",
                hint="check the shape against the mesh before calling jax.jit, and raise",
            )
        if not isinstance(outcome.error, error_type):
            kit.fail(
                f"the call raised another error than {error_type.__name__}",
                call,
                expected=f"{error_type.__name__}",
                got=one_line(f"{type(outcome.error).__name__}: {outcome.error}"),
                hint=f"raise {error_type.__name__} yourself, before JAX raises its own",
            )

    return kit.search(partial(draw.raising_calls, contract), body, share=0.5, by_placement=False)


def judge_compiles_nothing(
    kit: Kit, call: Call, outcome: Outcome, between: list[str], seen: list[list[Ran]] | None = None
) -> None:
    """A call like an earlier one (the same key) compiled nothing of its own (JAX's programs that
    move arrays aside); ``between``: what came between the two calls ("other keys", "a call that
    raised", "time passed"), for the failure's text.  ``seen``: what each execution was given in
    each earlier call of a key without placements (``Call.jit_key``), where a jit given a new kind
    of array may compile, as JAX's own does (jit_probe.compile_allowed).  The one judgement of
    ``fn.compile-once`` and ``fn.histories``."""
    compiled = [name for name in outcome.compiled if not internals.is_jax_move(name)]
    if not compiled:
        return
    if seen is not None and jit_probe.compile_allowed(compiled, outcome.executions or [], seen):
        return
    since = f" (since its last call: {', '.join(dict.fromkeys(between))})" if between else ""
    like = (
        "the same mesh, shapes and dtypes were called before, and no jit was given a new kind of "
        "array (a NumPy or uncommitted one, or one committed to a new sharding)"
        if seen is not None
        else "the same mesh, shapes, dtypes and placements were called before"
    )
    kit.fail(
        "a call like an earlier one of this history compiled again",
        call,
        expected=f"no compile: {like}{since}",
        got=f"{len(compiled)} backend compile(s): {', '.join(compiled)}",
        hint="keep each jitted function (keyed on everything it depends on, and nothing more): a "
        "cache that evicts, drops entries after an error or after a while, a new jax.jit per "
        "call, a key of object ids, or a shard_map called without a jax.jit around it "
        "recompiles",
    )


class _HistoryJudge:
    """Calls a history's steps in order and judges each (``fn.histories``): the result's values,
    dtype and layout, the arguments intact, every result the caller still holds intact, the
    contract's error where the step must raise, and no compile for a key called before."""

    def __init__(self, kit: Kit) -> None:
        self.kit = kit
        self.done: list[declared_history.Step] = []
        self.lru: dict[Any, declared_history.Step] = {}  # each key's last step, least recent first
        self.held: list[tuple[int, Any, Any]] = []  # (k, result, its host copy): the last HELD
        self.came_between: dict[Any, list[str]] = {}  # what happened since each key's last call
        self.ran: dict[Any, list[list[Ran]]] = {}  # what each key's calls gave each execution
        self.buffers: list[tuple[int, list[Any]]] = []  # (k, its arguments): the last HELD given NumPy
        self.clocks = 0  # seconds the function's clocks read ahead at the last call
        kit.history, kit.called = [], []

    def keys(self) -> list[tuple[Any, declared_history.Step]]:
        return list(self.lru.items())

    def rewritable(self) -> list[tuple[int, declared_history.Step]]:
        return [(k, self.done[k - 1]) for k, _ in self.buffers]

    def _rewrite(self, k: int, call: Call, arguments: list[Any]) -> bool:
        """The k-th call's writeable NumPy arguments, ``call``'s values written into them, in
        ``arguments``' place; False where the caller no longer holds them."""
        kept = dict(self.buffers).get(k)
        if kept is None:
            return False
        for j, (old, host) in enumerate(zip(kept, call.hosts, strict=True)):
            if _writeable(old) and old.shape == host.shape:
                old[...] = host
                arguments[j] = old
        return True

    def passable(self) -> list[tuple[int, int, declared_history.Step]]:
        contract = self.kit.contract
        if LAYOUTS not in contract.first.placements:
            return []
        specs = declared_history.out_specs(contract)
        found = []
        for k, result, _ in self.held:
            step = self.done[k - 1]
            leaves = jax.tree_util.tree_leaves(result)
            if len(leaves) != len(specs):
                continue
            first = step.call.hosts[0]
            for j, (leaf, spec) in enumerate(zip(leaves, specs, strict=True)):
                if (
                    spec in contract.first.layouts
                    and getattr(leaf, "shape", None) == first.shape
                    and getattr(leaf, "dtype", None) == first.dtype
                ):
                    found.append((k, j, step))
        return found

    def _held_leaf(self, k: int, leaf: int) -> tuple[Any, np.ndarray] | None:
        for j, result, host in self.held:
            if j == k:
                return jax.tree_util.tree_leaves(result)[leaf], jax.tree_util.tree_leaves(host)[leaf]
        return None

    def run(self, step: declared_history.Step) -> None:
        kit = self.kit
        call = step.call
        arguments = call.arguments()
        if step.back is not None:
            found = self._held_leaf(*step.back)
            want = call.hosts[0]
            if found is None or (found[1].shape, found[1].dtype) != (want.shape, want.dtype):
                return  # no such result held, or not one the first argument can be: nothing to pass back
            arguments[0], host = found
            call = replace(call, hosts=(host, *call.hosts[1:]))
            step = replace(step, call=call)
        if step.rewritten is not None and not self._rewrite(step.rewritten, call, arguments):
            return  # the caller no longer holds those arrays: nothing to rewrite
        assert kit.history is not None and kit.called is not None
        kit.history.append(step)
        kit.called.append(step)
        if step.clocks != self.clocks:  # time passed since every key's last call
            self.clocks = step.clocks
            for between in self.came_between.values():
                between.append("time passed")
        _, outcome = kit.call(call, arguments, clocks=step.clocks, under=step.under, watch_jit=True)
        if step.raises:
            self._raised(step, outcome.error)
            judge_intact(kit, call, arguments)
            self._judge_held()
            for between in self.came_between.values():
                between.append("a call that raised")
            self.done.append(step)
            return
        if outcome.error is not None:
            if call.may_refuse(outcome.error):  # refused, as it may be: the arguments intact, on
                judge_intact(kit, call, arguments)
                self._judge_held()
                self.done.append(step)
                return
            kit.fail_raised(call, outcome.error)
        result = outcome.result
        judge_values(kit, call, result, _REWRITTEN_HINT if step.rewritten is not None else None)
        try:
            assert_layout(result, targets(call))
        except AssertionFailed as failed:
            hint = _stale_hint(self.done, call, result) or _no_mesh_hint(call) or failed.hint
            kit.fail(failed.summary, call, expected=failed.expected, got=failed.got, hint=hint)
        judge_intact(kit, call, arguments)
        key = (call.jit_key(), step.under)  # a context is part of jax.jit's own key
        if key in self.lru:
            judge_compiles_nothing(kit, call, outcome, self.came_between.get(key) or [], self.ran[key])
        self.ran.setdefault(key, []).append(list(outcome.executions or []))
        self._judge_held()
        self.done.append(step)
        self._keep_buffers(arguments)
        self.lru.pop(key, None)
        self.lru[key] = step
        self.came_between[key] = []
        for other, between in self.came_between.items():
            if other != key:
                between.append("other keys")
        if jax.process_count() == 1:  # across processes a result is judged by its own shards
            self.held.append((len(self.done), result, jax.tree_util.tree_map(np.array, result)))
            del self.held[: -declared_history.HELD]

    def _keep_buffers(self, arguments: list[Any]) -> None:
        """The caller keeps this call's writeable NumPy arguments, to fill and give again."""
        if any(_writeable(a) for a in arguments):
            self.buffers.append((len(self.done), arguments))
            del self.buffers[: -declared_history.HELD]

    def _raised(self, step: declared_history.Step, error: BaseException | None) -> None:
        kit, expected = self.kit, self.kit.contract.raises
        assert expected is not None
        if error is None:
            kit.fail(
                f"the call returned instead of raising {expected.__name__}",
                step.call,
                expected=f"{expected.__name__}: {kit.contract.first.layouts[0]} does not divide the shape",
                got="a result",
                hint="check the shapes against the mesh before calling jax.jit, and raise",
            )
        if not isinstance(error, expected):
            kit.fail(
                f"the call raised another error than {expected.__name__}",
                step.call,
                expected=expected.__name__,
                got=one_line(f"{type(error).__name__}: {error}"),
                hint=f"raise {expected.__name__} yourself, before JAX raises its own",
            )

    def _judge_held(self) -> None:
        """Every result the caller still holds: neither deleted (donated) nor changed."""
        for k, result, host in self.held:
            _judge(
                self.kit,
                self.done[k - 1].call,
                lambda r=result, h=host, k=k: assert_input_intact(h, r, what=f"the result of call {k}"),
            )


_REWRITTEN_HINT = (
    "the caller wrote new values into the NumPy arrays of an earlier call and passed them again: "
    "a cache keyed on the array itself (id(x), x.ctypes.data, its buffer) hands back the earlier "
    "call's result; key on the values, or do not cache results"
)


def _writeable(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.flags.writeable and value.size > 0


def _mesh_of(leaf: Any) -> Any:
    sharding = getattr(leaf, "sharding", None)
    return getattr(sharding, "mesh", None)


def _stale_hint(done: list[declared_history.Step], call: Call, result: Any) -> str | None:
    """Where a result lies on an earlier call's mesh: which call's, and what the two meshes share
    that a cache keyed on it cannot tell apart."""
    meshes = [_mesh_of(leaf) for leaf in jax.tree_util.tree_leaves(result)]
    for k in range(len(done), 0, -1):
        earlier, mesh = done[k - 1].call.mesh, call.mesh
        if earlier == mesh or not any(m == earlier for m in meshes):
            continue
        if done[k - 1].under:
            return (
                f"the result is laid out over call {k}'s mesh, {mesh_text(earlier)}, the process's "
                f"first call, made under {done[k - 1].context()}: a function that keeps what "
                f"its first call saw (the context's mesh, the default device) lays every later "
                f"result out for it; use the mesh each call is given"
            )
        ids, old = [int(d.id) for d in mesh.devices.flat], [int(d.id) for d in earlier.devices.flat]
        shared = []
        if sorted(ids) == sorted(old):
            shared.append("the same devices" + (" in the same flat order" if ids == old else ""))
        if tuple(mesh.shape.items()) == tuple(earlier.shape.items()):
            shared.append("the same axis names and sizes")
        elif mesh.axis_names == earlier.axis_names:
            shared.append("the same axis names")
        what = " and ".join(shared) or "nothing a mesh is told apart by"
        return (
            f"the result is laid out over call {k}'s mesh, {mesh_text(earlier)}, which shares {what} "
            f"with this call's: a cache of meshes or jitted functions keyed on that hands back an "
            f"earlier mesh's; key it on the mesh itself (its devices in order, shape and axis names)"
        )
    return None


@check(
    "fn.histories",
    "histories of calls over meshes, shapes, dtypes and placements, planned and searched: every "
    "result right and laid out right (none stale), every argument and held result intact, the "
    "contract's error between calls, and a key called before compiles nothing",
    declared=True,
    history=True,  # runs first (catalogue.run_order); --case replays one of its histories
    needs=(selftest.COMPILE_COUNT, selftest.JIT_SPY),  # the spy: what each call's jits were given
)
def fn_histories(kit: Kit, token: str | None) -> int:
    contract = kit.contract
    if token is not None:  # --case: exactly the history its token names, in this fresh process
        replay_history(kit, declared_history.decode(contract, token))
        return 1
    # The first calls under a context, each in a fresh process of its own, drawn now and judged
    # there beside the histories of this process (one process: across processes a fresh one
    # would be a single one).
    fresh: list[list[declared_history.Step]] = []
    if kit.cluster is None:
        kit.search_once(
            declared_history.first_calls(contract), fresh.extend, salt="first calls", shrink=False
        )
    jobs = [{"token": declared_history.encode(steps), "seed": kit.schedule.seed} for steps in fresh]
    kit.start_fresh(jobs)

    count = 0
    for name, strategy in declared_history.planned(contract):
        # Not shrunk: a planned history is what it is, and a try of a shrunk one would meet the
        # caches its first try left, so the history printed would not fail in a fresh process.
        count += kit.search_once(strategy, partial(replay_history, kit), salt=f"planned {name}", shrink=False)

    def searched(data: st.DataObject) -> None:
        declared_history.steps(contract, _HistoryJudge(kit), data)

    count += kit.search_once(st.data(), searched, salt="searched", examples=None)
    kit.judge_fresh(fresh, jobs)
    return count + len(fresh)


def replay_history(kit: Kit, steps: list[declared_history.Step]) -> None:
    """Call and judge ``steps`` in order, one history (a planned one, a ``--case`` replay, a
    fresh process's)."""
    judge = _HistoryJudge(kit)
    for step in steps:
        judge.run(step)


@check(
    "fn.compile-once",
    "a call again with the same mesh, shapes, dtypes and placements compiles nothing, in any history",
    declared=True,
    needs=(selftest.COMPILE_COUNT,),
)
def fn_compile_once(kit: Kit, _: None) -> int:
    def body(history: draw.History) -> None:
        kit.history = []
        seen: set[Any] = set()
        last: Any = None
        for call in history.calls:
            kit.history.append(call)
            _, outcome = kit.call(call)
            if outcome.error is not None:
                kit.fail_raised(call, outcome.error)
            key = call.key()
            if key in seen:
                judge_compiles_nothing(kit, call, outcome, ["other keys"] if key != last else [])
            seen.add(key)
            last = key

    return kit.search(partial(draw.histories, kit.contract), body)
