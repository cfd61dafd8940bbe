"""Find out from the jaxpr whether the implementation went through jax.jit.

Values cannot show that an implementation compiled its doubling with the
requested shardings: an eager ``2 * jax.device_put(x, s)`` gives the same
numbers and even the same layout.  Tracing can: a call through ``jax.jit``
leaves an equation of the jit primitive (named ``pjit`` before JAX 0.7)
whose ``in_shardings``/``out_shardings`` are the ones it was given, with
``UnspecifiedValue`` where none were.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jax.extend import core as jax_core
from jax.sharding import Sharding

from conformance._src import internals
from conformance._src.library import values

JIT_PRIMITIVES = ("jit", "pjit")


@dataclass(frozen=True)
class JitCall:
    """One jit equation: the shardings it gives the vector on the way in and out.

    ``inputs`` holds every input's rank and sharding, in the jit's order, for
    judging functions of any number of arrays (``assertions.assert_jit_shardings``).
    """

    name: str
    in_sharding: Any
    out_sharding: Any
    depth: int
    inputs: tuple[tuple[int, Any], ...] = ()
    # Whether the vector that went into this execution held the caller's x, undoubled
    # (jit_probe.observe given x's values; None: not asked, or unreadable).
    fed: bool | None = None
    ahead_of_time: bool = False  # a call of a jax.stages.Compiled executable, not of jax.jit
    # What the vector that went in was: "numpy", "uncommitted", or a committed array's sharding
    # (jit compiles for each of them apart: a committed array brings its own layout); None: unknown.
    argument: Any = None


@dataclass(frozen=True)
class Ran:
    """One execution of compiled code in a watched call: its name and what its first vector
    input was (``JitCall.argument``: jit compiles apart for each kind; None: no vector went in)."""

    name: str
    argument: Any = None


def _inputs(shardings: Any, avals: Any) -> tuple[tuple[int, Any], ...]:
    return tuple((int(getattr(a, "ndim", 0)), s) for s, a in zip(shardings, avals, strict=False))


def _subjaxprs(params: dict[str, Any]) -> Iterator[Any]:
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jax_core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jax_core.Jaxpr):
                yield item


def jit_calls(jaxpr: Any, depth: int = 0) -> Iterator[JitCall]:
    """Every jit equation whose first input and first output are vectors, at any depth."""
    if isinstance(jaxpr, jax_core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in JIT_PRIMITIVES:
            ins = [
                (v, s)
                for v, s in zip(eqn.invars, eqn.params["in_shardings"], strict=False)
                if getattr(v.aval, "ndim", 0) == 1
            ]
            outs = [
                (v, s)
                for v, s in zip(eqn.outvars, eqn.params["out_shardings"], strict=False)
                if getattr(v.aval, "ndim", 0) == 1
            ]
            if ins and outs:
                yield JitCall(str(eqn.params.get("name", "?")), ins[0][1], outs[0][1], depth)
        for sub in _subjaxprs(eqn.params):
            yield from jit_calls(sub, depth + 1)


def output_chain(jaxpr: Any, index: int = 0, depth: int = 0) -> list[JitCall]:
    """The jit equations that produce output ``index``, outermost first.

    Only these count: a jit with the right shardings whose result is then
    doubled (or moved) outside of it did not compile the doubling.
    """
    if isinstance(jaxpr, jax_core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if index >= len(jaxpr.outvars):
        return []
    out = jaxpr.outvars[index]
    for eqn in jaxpr.eqns:
        if eqn.primitive.name not in JIT_PRIMITIVES:
            continue
        for k, var in enumerate(eqn.outvars):
            if var is out:
                vectors = [
                    s
                    for v, s in zip(eqn.invars, eqn.params["in_shardings"], strict=False)
                    if getattr(v.aval, "ndim", 0) == 1
                ]
                call = JitCall(
                    str(eqn.params.get("name", "?")),
                    vectors[0] if vectors else None,
                    eqn.params["out_shardings"][k],
                    depth,
                    _inputs(eqn.params["in_shardings"], [v.aval for v in eqn.invars]),
                )
                return [call, *output_chain(eqn.params["jaxpr"], k, depth + 1)]
    return []


def observe(
    fn: Any, x: Any, *, input_values: np.ndarray | None = None, **kwargs: Any
) -> tuple[Any, list[JitCall], list[Ran]]:
    """Call ``fn(x, **kwargs)`` for real; return its result, the jit chain that produced it, and
    every execution of compiled code in the call (``Ran``: its name, what its vector was).

    Sees what tracing cannot: the path a real input takes (a NumPy array, an
    array already committed somewhere) and implementations that look at
    concrete values (``x.committed``, ``np.asarray``).  Every jitted call in
    it takes JAX's Python dispatch path, where the shardings it was compiled
    with are visible (internals.jit_executions), and so does every call of an
    ahead-of-time ``Compiled`` executable, which states its own shardings; each
    execution's inputs and outputs are recorded.  The chain is the execution
    whose output *is* the returned object, plus the jit equations inside it
    that produce that output.  Given ``input_values`` (x's values on the host),
    the chain's execution says whether its vector input held them (``fed``).
    Runs on the implementation's thread.
    """
    with internals.jit_executions() as seen:
        result = fn(x, **kwargs)
    chain = _chain(seen, result, input_values)
    return result, chain, [Ran(e.name, _vector_argument(e)) for e in seen]


def watch(fn: Any) -> tuple[Any, list[Ran]]:
    """Call ``fn()`` for real; return its result and every execution of compiled code in it, each
    with what it was given (``Ran.argument``: a tuple, one entry per array of rank 1 or more it
    was given; None where it was given none), for ``compile_allowed``."""
    with internals.jit_executions() as seen:
        result = fn()
    return result, [Ran(e.name, _arguments(e)) for e in seen]


def _arguments(execution: internals.Execution) -> tuple[Any, ...] | None:
    given = [_argument(v) for ndim, v in zip(execution.in_ndims, execution.inputs, strict=False) if ndim >= 1]
    return tuple(given) or None


def observe_outputs(
    fn: Any, *args: Any, outputs: Any = None, **kwargs: Any
) -> tuple[Any, list[list[JitCall]]]:
    """``observe`` for every output: ``outputs(result)`` lists them (default: the pytree's leaves).

    Each chain's first call says whether that execution computed from the call's
    arguments (``fed``, see ``computed_from``)."""
    import jax

    with internals.jit_executions() as seen:
        result = fn(*args, **kwargs)
    leaves = jax.tree_util.tree_leaves(result) if outputs is None else outputs(result)
    given = [a for a in jax.tree_util.tree_leaves((args, kwargs)) if _is_array(a) and a.ndim >= 1]
    chains = []
    for leaf in leaves:
        chain = _chain(seen, leaf)
        producer = _producer(seen, len(seen), leaf)
        if chain and producer is not None:
            chain[0] = dataclasses.replace(chain[0], fed=computed_from(seen, producer, given))
        chains.append(chain)
    return result, chains


def _is_array(value: Any) -> bool:
    import jax

    return isinstance(value, (np.ndarray, jax.Array)) and not isinstance(value, jax.core.Tracer)


def _producer(seen: list[internals.Execution], before: int, value: Any) -> int | None:
    """The index of the latest execution before ``before`` that returned ``value`` itself."""
    for k in range(before - 1, -1, -1):
        if any(out is value for out in seen[k].outputs):
            return k
    return None


def computed_from(seen: list[internals.Execution], index: int, arguments: list[Any]) -> bool | None:
    """Whether execution ``index`` computed from the call's ``arguments``: it, or an earlier
    execution whose output it was given, was given an argument itself or an array holding an
    argument's values (a NumPy argument placed, an argument moved).  False when what it was
    given instead has an argument's shape and dtype but other values: computed outside any jit
    (on the host; an eager op is an execution of its own).  None when nothing it was given
    looks like an argument (reshaped, padded, cast) or an argument cannot be read: unknown,
    never a verdict."""
    alike, todo, done = False, [index], set()
    while todo:
        k = todo.pop()
        if k in done:
            continue
        done.add(k)
        for value in seen[k].inputs:
            if any(value is a for a in arguments):
                return True
            earlier = _producer(seen, k, value)
            if earlier is not None:
                todo.append(earlier)
                continue
            shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
            for argument in arguments:
                if argument.shape != shape or np.dtype(argument.dtype).newbyteorder("=") != dtype:
                    continue
                alike = True
                readable = not getattr(argument, "is_deleted", lambda: False)() and getattr(
                    argument, "is_fully_addressable", True
                )
                held = _holds(value, np.asarray(argument)) if readable else None
                if held is None:
                    return None
                if held:
                    return True
    return False if alike else None


def _holds(value: Any, expected: np.ndarray) -> bool | None:
    """Whether the array ``value`` holds ``expected``'s values (None: it cannot be read here)."""
    if getattr(value, "shape", None) != expected.shape:
        return False
    if not getattr(value, "is_fully_addressable", True) or getattr(value, "is_deleted", lambda: False)():
        return None
    want = expected.astype(expected.dtype.newbyteorder("="), copy=False)
    shards = getattr(value, "addressable_shards", None)
    try:  # shard by shard, each read where it lies: no copy of the whole (a vector past 32 MiB)
        parts = (
            [(np.asarray(s.data), want[s.index]) for s in shards] if shards else [(np.asarray(value), want)]
        )
    except Exception:  # noqa: BLE001 -- unreadable: unknown, never a verdict
        return None
    for host, part in parts:
        if host.dtype != part.dtype:
            return False
        if not values.same_bytes(host, part) and not values.values_match(host, [part]).all():
            return False
    return True


def _chain(
    seen: list[internals.Execution], leaf: Any, input_values: np.ndarray | None = None
) -> list[JitCall]:
    for execution in reversed(seen):
        for k, out in enumerate(execution.outputs):
            if out is leaf:
                pairs = list(zip(execution.in_shardings, execution.in_ndims, execution.inputs, strict=False))
                vectors = [(s, value) for s, ndim, value in pairs if ndim == 1]
                fed = None
                if input_values is not None and vectors:
                    fed = _holds(vectors[0][1], input_values)
                elif input_values is not None:
                    fed = False  # no vector went in: the result was not computed from x
                call = JitCall(
                    execution.name,
                    vectors[0][0] if vectors else None,
                    execution.out_shardings[k] if k < len(execution.out_shardings) else None,
                    0,
                    tuple(zip(execution.in_ndims, execution.in_shardings, strict=False)),
                    fed=fed,
                    ahead_of_time=execution.ahead_of_time,
                    argument=_argument(vectors[0][1]) if vectors else None,
                )
                inner = [] if execution.jaxpr is None else output_chain(execution.jaxpr, k, 1)
                return [call, *inner]
    return []


def _vector_argument(execution: internals.Execution) -> Any:
    for ndim, value in zip(execution.in_ndims, execution.inputs, strict=False):
        if ndim == 1:
            return _argument(value)
    return None


def _argument(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return "numpy"
    committed = getattr(value, "committed", None)
    return None if committed is None else value.sharding if committed else "uncommitted"


def is_layout(sharding: Any, target: Sharding) -> bool:
    """True when a jit sharding parameter is the target layout for a vector."""
    return isinstance(sharding, Sharding) and sharding.is_equivalent_to(target, 1)


def describe(sharding: Any) -> str:
    name = type(sharding).__name__
    if name == "UnspecifiedValue":
        return "not given (UnspecifiedValue)"
    return repr(sharding)


def _kind(argument: Any) -> Any:
    """What JAX's jit keeps one executable for: a NumPy or an uncommitted array alike (both are
    placed by the jit), a committed array per sharding (it brings its own layout); a tuple of
    these for an execution given several arrays (``watch``)."""
    if isinstance(argument, tuple):
        return tuple(_kind(a) for a in argument)
    return "host or uncommitted" if argument in ("numpy", "uncommitted") else argument


def _runs(name: str, compiled: str) -> bool:
    return compiled in (name, f"jit({name})")


def compile_allowed(compiled: Sequence[str], given: Sequence[Ran], seen: Sequence[Sequence[Ran]]) -> bool:
    """May a call whose (shape, dtype, mesh) came before compile ``compiled`` (the names of its own
    programs: JAX's programs for moving ``x`` are never counted, internals.JAX_MOVE_PROGRAMS)?

    Only where JAX's jit does (tests/test_kit_history.py measures it): each jitted function
    compiles the first time, for this shape, dtype and mesh, that it is given a NumPy or
    uncommitted array (one kind), or an array committed to a given sharding (for an execution
    given several arrays, a new tuple of these).  ``given``: every
    execution of compiled code in this call and what its vector was (jit_probe.Ran), so a jit of
    the implementation's own that stages ``x`` first is judged as the doubling jit is; ``seen``:
    the same for each earlier call of this key.  A compile of a function that was given nothing
    new is not allowed; nor is any compile where no execution was given anything new."""
    before = [(ran.name, _kind(ran.argument)) for call in seen for ran in call if ran.argument is not None]
    new = [
        ran
        for ran in given
        if ran.argument is not None
        and not internals.is_jax_move(ran.name)  # JAX's own programs move x: their compiles are JAX's
        and (ran.name, _kind(ran.argument)) not in before
    ]
    if not new:
        return False
    for name in compiled:
        if any(_runs(ran.name, name) for ran in given) and not any(_runs(ran.name, name) for ran in new):
            return False  # that function ran, but on nothing new: its cache lost it
    return True
