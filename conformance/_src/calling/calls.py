"""Calling the implementation: a time limit on every call, and compile counting.

Every call runs on one long-lived daemon thread so that a call that never
returns (think of a collective that deadlocks) can be abandoned: the check
fails with ``ImplementationHung`` and, because a hung implementation may hold
locks or devices, it is never called again in this session -- every later
call fails at once with the same error, so Hypothesis cannot shrink through
repeated hangs and the run ends within a few timeouts.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jax

from conformance._src import internals

if TYPE_CHECKING:
    from conformance._src.calling.supervise import CallLog


def global_state() -> dict[str, str]:
    """JAX's configuration and the mesh context of the calling thread, as text.

    Meshes set with ``jax.set_mesh`` are thread-local, so this must run on the
    thread the implementation runs on (``Runner.run`` does that).
    """
    state = {name: repr(value) for name, value in jax.config.values.items()}
    state.update(internals.mesh_context())
    return state


def finished(result: Any) -> Any:
    """``result``, once every array in it is computed.

    jit returns before its computation ends; a call is over only when that
    has ended too.  So the call's time is the implementation's, a computation
    that never ends (a collective some device never joins) hangs the call
    under its timeout rather than the kit's next look at the result, and an
    error raised while computing is the call's error.  Nothing is left in
    flight when the kit moves on and drops the call's arrays.
    """
    return jax.block_until_ready(result)


# A result over this many bytes, and over RUNAWAY_FACTOR times its input's, ends the session's calls
# (Kit._call): a right result has exactly its input's bytes, and a run must stay in bounded memory
# and time whatever the implementation returns.
RUNAWAY_BYTES = 64 * 2**20
RUNAWAY_FACTOR = 16


def result_bytes(result: Any) -> int:
    """The bytes of every array in ``result`` (a pytree), globally."""
    return sum(int(getattr(leaf, "nbytes", 0) or 0) for leaf in jax.tree_util.tree_leaves(result))


class ImplementationHung(BaseException):
    """A call did not return within --call-timeout.

    A BaseException, so that Hypothesis does not catch it and shrink: there is
    nothing to learn from calling a hung implementation again.  The kit turns
    it into the check's failure.
    """


@dataclass
class Outcome:
    """What one call did: its result or exception, and what it cost."""

    result: Any = None
    error: BaseException | None = None
    compiles: int = 0
    seconds: float = 0.0
    compiled: list[str] = field(default_factory=list)  # the compiled functions' names (CompileCounter)
    # The jit executions that produced the result (jit_probe.JitCall, outermost first),
    # for calls made while watching jax.jit; None for calls that were not watched.
    jit_chain: list[Any] | None = None
    # Every execution of compiled code in a watched call (jit_probe.Ran: its name, what it was given).
    executions: list[Any] | None = None


@dataclass
class Stats:
    """Totals for the run's timing summary."""

    calls: int = 0
    compiles: int = 0
    seconds_in_impl: float = 0.0


@dataclass
class Runner:
    """Runs functions on the worker thread, each bounded by ``timeout`` seconds."""

    timeout: float
    stats: Stats = field(default_factory=Stats)
    hung: str | None = None  # what hung, once something has
    # global_state() on the worker thread before the first call of the session:
    # a call that changes it for good is caught even by checks that run later.
    initial_state: dict[str, str] | None = None
    # Under supervision (supervise.py): every call is noted in the call log with
    # ``label`` (check ID, input in words, rerun command), so that the watchdog
    # can end a call past ``watch_timeout`` and name it.
    call_log: CallLog | None = None
    watch_timeout: float = 0.0
    label: tuple[str, str, str] = ("", "", "")
    _jobs: queue.Queue[Any] = field(default_factory=queue.Queue)
    _thread: threading.Thread | None = None

    def _serve(self) -> None:
        while True:
            fn, box, done = self._jobs.get()
            try:
                box.append((True, fn()))
            except BaseException as exc:  # noqa: BLE001 -- handed back to the caller
                box.append((False, exc))
            done.set()
            del fn, box, done  # the result lives as long as the caller keeps it, not until the next call

    def run(self, what: str, fn: Callable[[], Any]) -> Outcome:
        """Run ``fn`` on the worker; raise ImplementationHung past the timeout."""
        if self.hung is not None:
            raise ImplementationHung(
                f"not called: earlier in this session, {self.hung}; the implementation is not called again"
            )
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="conformance-impl", daemon=True)
            self._thread.start()
            box: list[tuple[bool, Any]] = []
            done = threading.Event()
            self._jobs.put((global_state, box, done))
            if done.wait(self.timeout) and box[0][0]:
                self.initial_state = box[0][1]
        counter = internals.compile_counter()
        box = []
        done = threading.Event()
        before, named = counter.count, len(counter.names)
        start = time.perf_counter()
        log = self.call_log
        if log is not None:
            log.begin(*self.label, self.watch_timeout)
        self._jobs.put((fn, box, done))
        finished_in_time = done.wait(self.timeout)
        if log is not None and finished_in_time:
            log.end(self.label[0])
        if not finished_in_time:
            self.hung = f"{what} did not return within {self.timeout:g} s"
            raise ImplementationHung(
                f"{what} did not return within --call-timeout={self.timeout:g} s. Does it wait "
                f"for something that never comes (a lock, a queue, a collective that other "
                f"devices or processes never join)? It will not be called again in this session."
            )
        seconds = time.perf_counter() - start
        compiles = counter.count - before
        self.stats.calls += 1
        self.stats.compiles += compiles
        self.stats.seconds_in_impl += seconds
        ok, value = box[0]
        outcome = Outcome(value if ok else None, None if ok else value, compiles, seconds)
        outcome.compiled = counter.names[named:]
        return outcome
