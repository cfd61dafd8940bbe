"""The engine: the function under test, its calls, and running one check, for every contract.

A ``Kit`` is made once per pytest session by the plug-in (session/setup.py), after the devices
are set up and ``--impl`` is loaded, whatever ``--contract`` declares.  It is what a check's body
is given: ``call`` and ``result`` call the function on one input -- a ``Case`` of the one-vector
form (``shared=True``: once per distinct input, pool.py) or a declared contract's ``Call`` --
and ``fail`` raises the check's message block (contract/messages.py).  ``run_check`` is the one
place where a check meets its inputs and gets its verdict: the contract's form (a check that
does not apply is "not applicable", catalogue.py), the devices, the self-test probes it rests
on, the gates and ``--case`` replays; then, for a check of the one-vector form, the covering
schedule's input for every cell of its domain (coverage.py; for checks that judge one call, from
the pass shared by all of them, shared_pass.py) and Hypothesis with the profile's settings, the
check's own seed and example-database keys (explore.py); a check written over any declaration
searches the contract's own draw (``search``, declared/draw.py).  ``Inconclusive`` and
``NotApplicable`` become skips.
"""

from __future__ import annotations

import atexit
import os
import time
import traceback
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import jax
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from conformance._src import internals, selftest
from conformance._src.calling import clocks, context
from conformance._src.calling.calls import (
    RUNAWAY_BYTES,
    RUNAWAY_FACTOR,
    ImplementationHung,
    Outcome,
    Runner,
    finished,
    result_bytes,
)
from conformance._src.calling.distributed import Cluster
from conformance._src.contract import jax_bugs, messages
from conformance._src.contract.catalogue import (
    CHECKS,
    Check,
    CheckFailure,
    Inconclusive,
    KitError,
    NotApplicable,
    Refused,
    failure_in,
    gates_for,
    not_applicable,
)
from conformance._src.declared.contract import NUMPY_FORMS_KIND, Contract, dtypes_held
from conformance._src.declared.draw import MESH_KINDS, NUMPY_FORMS, Call, out_of_reach
from conformance._src.inputs import coverage, history
from conformance._src.inputs.case import (
    Case,
    call_text,
    decode,
    encode,
    encode_history,
    make_input,
    may_refuse,
)
from conformance._src.inputs.schedule import Schedule, mesh_variants
from conformance._src.inputs.strategies import cases as draw_cases
from conformance._src.library import jit_probe
from conformance._src.running import explore, shared_pass
from conformance._src.running import fresh as fresh_processes
from conformance._src.running.pool import Pool
from conformance._src.verdict import CheckVerdict, Status

# A declared contract's checks (search): examples per check and profile, a history counting as one.
EXAMPLES = {"default": 20, "ci": 20, "thorough": 150}
# How long Hypothesis may shrink a declared contract's failure, per profile: each try calls the
# function (compiles and all), and a default run of a declared contract stays within a minute.
DECLARED_SHRINK_SECONDS = {"default": 8.0, "ci": 15.0, "thorough": 60.0}
# The searched histories of fn.histories, as a share of EXAMPLES: each calls up to 2 * STEPS times.
HISTORY_SHARE = 0.3


def _past_the_simplest(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy``, its simplest example never drawn first.  Hypothesis tries the all-zero draw
    first: a cell's one example would be its smallest shape, all zeros, on one device, in every
    run (a doubled zero is zero).  A first draw that must be True rules that one out; a failure
    still shrinks as far as it goes."""
    return st.tuples(st.booleans().filter(bool), strategy).map(lambda pair: pair[1])


@dataclass
class Kit:
    impl: Callable[..., Any]
    spec: str
    contract: Contract
    devices: int
    runner: Runner
    profile: str = "default"
    contract_spec: str = ""  # --contract: seed, full or MODULE:ATTR (the rerun line's); "": the name
    replay: str | None = None  # a --case token: one input, or a history
    records: dict[str, CheckVerdict] = field(default_factory=dict)
    check_id: str = ""
    cluster: Cluster | None = None  # set in --distributed runs
    pool: Pool = field(default_factory=Pool)
    user_timeout: float | None = None  # --call-timeout, when the runner's limit differs from it
    crashed_gates: dict[str, str] = field(default_factory=dict)  # gates whose process died earlier
    schedule: Schedule = field(default_factory=Schedule)  # the covering schedule's inputs (coverage.py)
    selected: frozenset[str] | None = None  # --check's IDs; None: every check
    part: str = ""  # options.run_part: "chip" in an accelerator run's chips' part (calling/chips.py)
    in_schedule: bool = False  # True while the schedule's inputs are judged
    running: str = ""  # the check whose test runs now (run_check); check_id: the one judging
    shared: dict[str, shared_pass.Finding] | None = None  # the shared pass's findings, per check
    _probes: dict[str, str] | None = None  # selftest.self_test(): the probes that failed, and why
    # Per check: the inputs a known bug of the installed JAX kept from being judged (jax_bugs.py),
    # per bug, and the cells where that happened.
    _hits: dict[str, dict[str, int]] = field(default_factory=dict)
    _hit_cells: dict[str, set[str]] = field(default_factory=dict)
    _gates: dict[str, CheckFailure | None] = field(default_factory=dict)
    _pairs_seen: dict[str, set[tuple[str, str, str, str]]] = field(default_factory=dict)
    _possible: dict[str, set[tuple[str, str, str, str]]] = field(default_factory=dict)  # per domain
    history: list[Any] | None = (
        None  # the history being judged (Cases, or a declared one's steps), for messages
    )
    called: list[Any] | None = None  # a declared history's steps called so far: the rerun line's --case
    references: dict[Any, Any] = field(default_factory=dict)  # oracle=ITSELF: results on one device
    _fresh_started: dict[str, Any] = field(default_factory=dict)  # fresh.start: job as JSON -> process
    _raised: weakref.WeakSet[BaseException] = field(default_factory=weakref.WeakSet)  # fail()'s, uncleared

    # -- calling the implementation ------------------------------------------------
    def call(
        self,
        case: Case | Call,
        x: Any = None,
        *,
        shared: bool = False,
        watch_jit: bool | None = None,
        clocks: int = 0,
        under: tuple[Any, ...] = (),
    ) -> tuple[Any, Outcome]:
        """Call the implementation on ``case`` (or on the given ``x``).

        ``shared=True``: one call per distinct input in the session, whichever
        check asks first (see pool.py); for checks that judge a call on its own.
        Those calls are watched (jit_probe.observe): the outcome's ``jit_chain``
        says which jit executions produced the result, for jit.shardings.

        A declared contract's ``Call``: on its fresh arguments (or the list ``x``), its clocks
        ``clocks`` seconds ahead (calling/clocks.py), ``under`` a context (calling/context.py); the
        outcome's ``error`` is what it raised, and with ``watch_jit`` its ``executions`` what each
        execution of compiled code was given (jit_probe.watch).
        """
        if isinstance(case, Call):
            return self._call_declared(case, x, clocks, under, watch=bool(watch_jit))
        if shared and x is None:
            x, outcome, _ = self.pool.observe(case, lambda c: self._call(c, None, watch_jit=True))
        else:
            x, outcome = self._call(case, x, watch_jit=bool(watch_jit))
        bug = jax_bugs.hitting(case)
        if bug is not None and bug.raised(outcome.error):
            raise jax_bugs.KnownBugHit(bug)  # JAX's own bug, not the implementation's: not judged
        return x, outcome

    def in_fresh_processes(self, jobs: list[dict[str, Any]]) -> list[fresh_processes.Answer]:
        """Run each job (fresh.start) in a process of its own whose first call is its history's."""
        return fresh_processes.judge(self, jobs, self._fresh_started)

    def start_fresh(self, jobs: list[dict[str, Any]]) -> None:
        """Start these jobs' fresh processes now, to overlap what runs before ``judge_fresh``; none
        outlives the run.  Not in a chips' part: one process may hold the chips, and the
        forced-CPU part judges these histories."""
        if jobs and self.part == "chip":
            raise NotApplicable(
                "its histories run in fresh processes, and one process may hold the chips: "
                "the forced-CPU part of this run judges it"
            )
        if jobs:
            fresh_processes.start(self, jobs, self._fresh_started)
            atexit.register(fresh_processes.stop, self._fresh_started)

    def judge_fresh(self, histories: list[list[Any]], jobs: list[dict[str, Any]]) -> None:
        """Each history (Cases, or a declared contract's steps) in a fresh process of its own, all
        side by side, its job saying which (fresh.py): the first failure raised as the process said
        it; a process that ended without a verdict, a failure of its history."""
        declared = CHECKS[self.check_id].declared
        self.start_fresh(jobs)  # a no-op for jobs started before; not applicable in a chips' part
        for steps, answer in zip(histories, self.in_fresh_processes(jobs), strict=True):
            if answer.failure is not None:
                raise CheckFailure(answer.failure)
            if answer.kit_error is not None:
                raise KitError(
                    f"conformance: the fresh process of {self.check_id} failed in the kit: {answer.kit_error}"
                )
            if answer.ended is not None:
                self.history = steps
                self.called = steps if declared else None
                try:
                    self.fail(
                        "the fresh process ended without a verdict while it replayed this history",
                        steps[0].call if declared else steps[0],
                        expected="every call of the history returning (the first one under its context)",
                        got=answer.ended,
                        hint="rerun it: a fresh process loads your module, then calls it first "
                        "under the context",
                    )
                finally:
                    self.history = self.called = None

    def start_fresh_processes(self) -> None:
        """Start state.first-call's fresh processes now, to overlap the checks before it (a run
        of the whole suite, or one that selects it, without --case)."""
        check = fresh_processes.CHECK
        if self.replay is not None or (self.selected is not None and check not in self.selected):
            return
        if not_applicable(check, self.contract) is not None:
            return
        count = len(history.first_calls(contract=self.contract, seed=self.schedule.seed))
        self.start_fresh([{"seed": self.schedule.seed, "index": k} for k in range(count)])

    def not_judged(self, hit: jax_bugs.KnownBugHit, case: Case | None) -> None:
        """Count an input a known bug of the installed JAX kept from being judged (and its cell)."""
        hits = self._hits.setdefault(self.check_id, {})
        hits[str(hit)] = hits.get(str(hit), 0) + 1
        if case is not None:
            self._hit_cells.setdefault(self.check_id, set()).add(str(coverage.cell_of(case)))

    def _call_declared(
        self,
        call: Call,
        arguments: list[Any] | None,
        clocks_ahead: int,
        under: tuple[Any, ...],
        *,
        watch: bool,
    ) -> tuple[Any, Outcome]:
        args = call.arguments() if arguments is None else arguments
        kwargs, impl, mesh = call.keywords(), self.impl, call.mesh

        def one() -> Any:
            with clocks.ahead(clocks_ahead), context.entered(under, mesh):
                if watch:  # what each execution of compiled code was given (jit_probe.watch)
                    return jit_probe.watch(lambda: finished(impl(*args, **kwargs)))
                return finished(impl(*args, **kwargs))

        outcome = self.run(call, one)
        if watch and outcome.error is None:
            outcome.result, outcome.executions = outcome.result
        return args, outcome

    def run(self, call: Call, fn: Callable[[], Any]) -> Outcome:
        """Run ``fn`` (which calls the function) on the runner's thread, as a declared ``call``."""
        if self.runner.call_log is not None:
            self.runner.label = (self.check_id, call.describe(), self.rerun_command(call))
        try:
            return self.runner.run(f"the call on {call.describe()}", fn)
        except ImplementationHung as hung:
            self.fail(
                "the call did not return", call, expected="a result within --call-timeout", got=str(hung)
            )

    def _call(self, case: Case, x: Any, *, watch_jit: bool) -> tuple[Any, Outcome]:
        self._clear_raised()
        if x is None:
            x = make_input(case)
        record = self.records.get(self.check_id)
        if record is not None:  # what reached the implementation, read from x itself
            kind = coverage.arrived_kind(x, case)
            record.arrived[kind] = record.arrived.get(kind, 0) + 1
        kwargs = case.mesh_kwargs()
        impl, seconds = self.impl, case.clocks_ahead  # the clocks it reads: ahead by this (clocks.py)
        under, mesh = case.under, case.mesh  # the context the call is made in (context.py)
        try:
            if watch_jit:
                values = case.values

                def watched() -> Any:
                    with clocks.ahead(seconds), context.entered(under, mesh):
                        return finished(jit_probe.observe(impl, x, input_values=values, **kwargs))

                outcome = self.runner.run(call_text(case), watched)
                if outcome.error is None:
                    outcome.result, outcome.jit_chain, outcome.executions = outcome.result
            else:

                def plain() -> Any:
                    with clocks.ahead(seconds), context.entered(under, mesh):
                        return finished(impl(x, **kwargs))

                outcome = self.runner.run(call_text(case), plain)
        except ImplementationHung as hung:
            stopped = str(hung).startswith("not called:")  # an earlier call ended the session's calls
            try:
                self.fail(
                    "the implementation is not called again in this run"
                    if stopped
                    else "the call did not return",
                    case,
                    expected=f"a result within {self.runner.timeout:g} s",
                    got=str(hung),
                    hint="the check that stopped the calls says why"
                    if stopped
                    else "raise --call-timeout if it is only slow",
                )
            except CheckFailure as failure:
                raise ImplementationHung(str(failure)) from None
        size = result_bytes(outcome.result) if outcome.error is None else 0
        if size > max(RUNAWAY_BYTES, RUNAWAY_FACTOR * case.values.nbytes):
            self._runaway(case, size)
        return x, outcome

    def _runaway(self, case: Case, size: int) -> None:
        """A result far larger than its input: this check fails, and the implementation is not
        called again in the session (as after a hang), so the run ends in bounded memory and time."""
        got = f"a result of {size / 2**20:.0f} MiB for an input of {case.values.nbytes} bytes"
        self.runner.hung = f"{call_text(case)} returned {got}"
        try:
            self.fail(
                "the result is far larger than the input",
                case,
                expected=f"a vector of shape ({case.n},) and dtype {case.dtype}: {case.values.nbytes} bytes",
                got=got,
                hint="return the doubled input itself, shape (n,); after a result over "
                f"{RUNAWAY_BYTES // 2**20} MiB and {RUNAWAY_FACTOR}x its input's bytes, "
                "the kit calls the implementation no more in this run",
            )
        except CheckFailure as failure:
            raise ImplementationHung(str(failure)) from None

    @property
    def call_timeout(self) -> float:
        """--call-timeout: under supervision the watchdog enforces it, the runner's limit is a fallback."""
        return self.user_timeout if self.user_timeout is not None else self.runner.timeout

    def result(self, case: Case | Call, x: Any = None, *, shared: bool = False) -> tuple[Any, Any]:
        """``(x, result)``; an exception from the implementation fails the check."""
        x, outcome = self.call(case, x, shared=shared)
        if outcome.error is not None:
            if isinstance(case, Case) and may_refuse(case, outcome.error):
                raise Refused(messages.one_line(f"{type(outcome.error).__name__}: {outcome.error}"))
            self.fail_raised(case, outcome.error)
        return x, outcome.result

    def fail_raised(self, case: Case | Call, error: BaseException) -> NoReturn:
        """The call raised: the check fails, but for a refusal the contract allows (a declared
        call's ``may_refuse``), which ends the example unjudged."""
        text = messages.one_line(f"{type(error).__name__}: {error}")
        if isinstance(case, Call) and case.may_refuse(error):
            raise Refused(text)
        if isinstance(case, Call):
            hint = messages.hint_for_raised_call(case, error)
        else:
            hint = messages.hint_for_raised(case, error)
        self.fail("the call raised an exception", case, expected="a result", got=text, hint=hint)

    # -- failures ------------------------------------------------------------------
    def _clear_raised(self) -> None:
        """Clear the finished frames of the failures raised so far (before each call).

        Hypothesis keeps every failing example's exception until its search ends
        (state.histories: hundreds), and a traceback keeps its frames' locals:
        the results they judged, of any size.  By the next call, a failure has
        left the frames it was raised through; the traceback keeps them without
        their locals (``Kit._step`` does the same for the examples it runs).
        """
        for failure in list(self._raised):
            traceback.clear_frames(failure.__traceback__)
        self._raised.clear()

    def fail(
        self, summary: str, case: Case | Call | None, *, expected: str, got: str, hint: str | None = None
    ) -> NoReturn:
        history = self.history or None
        text = messages.block(
            self.check_id,
            summary,
            history=history,
            case=case,
            expected=expected,
            got=got,
            hint=hint,
            rerun=self.rerun_command(case),
        )
        if isinstance(case, Call):  # a declared call's values, which its description leaves out
            text = text.replace("\n  expected:", f"\n  values:   {case.values_text()}\n  expected:", 1)
        failure = CheckFailure(text)
        self._raised.add(failure)
        raise failure

    def rerun_command(self, case: Case | Call | None) -> str:
        """The command that reruns the check: on exactly this input or history where a token can
        say it; a declared contract's check with the run's seed, and its history's steps."""
        check = CHECKS[self.check_id]
        token, seed = None, None
        if check.declared:
            seed = self.schedule.seed
            if self.called:  # a history: exactly its calls, in a fresh process
                from conformance._src.declared import history as declared_history

                token = declared_history.encode(self.called)
        elif self.history and check.history:
            token = encode_history(self.history)
        elif isinstance(case, Case) and check.domain is not None:
            token = encode(case)
        return messages.rerun_command(
            self.spec,
            self.contract_spec or self.contract.name,
            self.devices,
            self.call_timeout,
            self.check_id,
            token,
            seed=seed,
            chips=(os.environ.get("JAX_PLATFORMS", ""), len(jax.devices("cpu")))
            if self.part == "chip"
            else None,
        )

    # -- running checks ------------------------------------------------------------
    def gate_failure(self, gate_id: str) -> CheckFailure | None:
        """Run a gate once per session and remember its verdict; a gate that crashed stays failed."""
        if gate_id in self.crashed_gates:
            self._gates.setdefault(gate_id, CheckFailure(self.crashed_gates[gate_id]))
        if gate_id not in self._gates:
            previous, self.check_id = self.check_id, gate_id
            try:
                self._step(None, lambda: CHECKS[gate_id].body(self, None))
                self._gates[gate_id] = None
            except CheckFailure as failure:
                self._gates[gate_id] = failure
            except ImplementationHung as hung:
                self._gates[gate_id] = CheckFailure(str(hung))
            finally:
                self.check_id = previous
        return self._gates[gate_id]

    def broken_probe(self, check: Check) -> str | None:
        """Why the kit cannot judge ``check`` here: a probe of the self-test it rests on failed."""
        # In a --distributed run every example's verdict goes through the cluster's client.
        needs = (*check.needs, selftest.CLUSTER_CLIENT) if self.cluster is not None else check.needs
        if not needs:
            return None
        if self._probes is None:
            self._probes = selftest.self_test(cluster=self.cluster is not None)
        failed = [name for name in needs if name in self._probes]
        if not failed:
            return None
        return (
            f"[{check.id}] kit error: the kit cannot judge this check on {selftest.versions()}. "
            f"Its self-test probe {failed[0]!r} failed: {self._probes[failed[0]]}. The check is neither "
            f"passed nor failed, and says nothing about the implementation; please report it with "
            f"these versions."
        )

    @staticmethod
    def _skip(record: CheckVerdict, status: Status, reason: str) -> NoReturn:
        record.status, record.message = status, reason
        pytest.skip(reason)

    def run_check(self, check_id: str) -> CheckVerdict:
        """Run one check; its verdict is ``self.records[check_id]``, its status set here and only here.

        A failure is raised (``CheckFailure``) and a verdict other than passed or
        failed is a pytest skip, so that pytest's own outcome agrees with it.
        """
        check = CHECKS[check_id]
        self.check_id = self.running = check_id
        record = self.records[check_id] = CheckVerdict(check_id, status=Status.PARTIAL)
        start = time.perf_counter()
        stats = self.runner.stats
        calls, compiles, in_impl = stats.calls, stats.compiles, stats.seconds_in_impl
        try:
            reason = not_applicable(check_id, self.contract)
            if reason is not None:
                if check.applies(self.contract):  # too few devices: the run did not judge it
                    record.left_out = [reason.removeprefix("not applicable: ")]
                self._skip(record, Status.NOT_APPLICABLE, reason)
            broken = self.broken_probe(check)
            if broken is not None:
                record.status, record.message = Status.KIT_ERROR, broken
                pytest.fail(broken, pytrace=False)
            if check.gate:
                record.examples = 1
                gates = [g.id for g in gates_for(self.contract)]
                for earlier in gates[: gates.index(check_id)]:
                    if self.gate_failure(earlier) is not None:  # its failure is not this gate's to name
                        self._skip(record, Status.NOT_RUN, f"not run: gate check {earlier} failed")
                failure = self.gate_failure(check_id)
                if failure is not None:
                    raise failure
            else:
                for gate in gates_for(self.contract):
                    if self.gate_failure(gate.id) is not None:
                        self._skip(record, Status.NOT_RUN, f"not run: gate check {gate.id} failed")
                self.check_id = check_id
                if check.declared or check.part:  # written over any declaration: it searches its draw
                    try:
                        record.examples = int(check.body(self, self.replay) or 0)
                    except NotApplicable as why:
                        self._skip(record, Status.NOT_APPLICABLE, f"not applicable: {why}")
                    record.left_out = out_of_reach(self.contract)
                    record.status = Status.PASSED
                    return record
                if self.replay is not None or check.domain is None:
                    record.examples = 1
                    replay = self.replay if check.history or self.replay is None else decode(self.replay)
                    self._run_one(record, replay)
                else:
                    inconclusive: list[str] = []
                    if check.domain.shared:
                        shared_pass.take(self, check, record, inconclusive)
                    else:
                        self._run_schedule(check, record, inconclusive)
                    self._run_hypothesis(check, record, inconclusive)
                    if inconclusive:
                        record.left_out = [f"inconclusive: {inconclusive[0]}", *self._left_out(check, record)]
                        self._skip(record, Status.INCONCLUSIVE, f"inconclusive: {inconclusive[0]}")
            record.left_out = self._left_out(check, record)
            record.status = Status.PASSED
            return record
        except CheckFailure as failure:
            record.status, record.message = Status.FAILED, str(failure).split("\n\nFalsifying", 1)[0]
            raise
        except NotApplicable as why:  # raised under a check's own calls (a chips' part: Kit.start_fresh)
            self._skip(record, Status.NOT_APPLICABLE, f"not applicable: {why}")
        except KitError as error:  # the kit's own fault: a kit error, not the implementation's
            record.status, record.message = Status.KIT_ERROR, str(error)
            raise pytest.fail.Exception(str(error), pytrace=False) from None
        except ImplementationHung as hung:  # not shrunk: ends the check at once
            record.status, record.message = Status.FAILED, str(hung)
            raise CheckFailure(str(hung)) from None
        except Exception as error:  # the implementation broke the kit's own code
            record.status, record.message = Status.FAILED, f"{type(error).__name__}: {error}"
            raise
        finally:
            self.history = self.called = None
            record.known_bugs = dict(self._hits.get(check_id, {}))
            if check.domain is not None and check.domain.axes is not None and record.coverage:
                record.pairs = self._pairs(check)
            record.seconds = time.perf_counter() - start
            record.calls = stats.calls - calls
            record.compiles = stats.compiles - compiles
            record.seconds_in_impl = stats.seconds_in_impl - in_impl

    def _step(self, case: Case | str | None, body: Callable[[], None]) -> str | None:
        """Run one example; return why it was inconclusive, if it was.

        In a --distributed run every process agrees on the example's verdict
        before anything is raised, so that all of them hand Hypothesis the
        same outcome and stay in lockstep, shrinking included.
        """
        local: BaseException | None = None
        inconclusive = None
        if self.runner.call_log is not None:  # what the watchdog names if a call of this example hangs
            one = case if isinstance(case, Case) else None  # a group's calls are named by the check
            # The check of the test running now: a crash is its verdict (in the shared pass it
            # may be judging for another check, whose ID the rerun command names).
            self.runner.label = (
                self.running or self.check_id,
                one.describe() if one is not None else "the check's own inputs (see its title)",
                self.rerun_command(one),
            )
        try:
            body()
        except Inconclusive as why:
            inconclusive = str(why)
        except Refused:
            pass  # an input it may refuse, refused: nothing more to judge (hygiene checks judged x)
        except jax_bugs.KnownBugHit as hit:  # JAX's own bug: the input is not judged, and counted as such
            self.not_judged(hit, case if isinstance(case, Case) else None)
        except (Exception, ImplementationHung) as error:
            # Hypothesis keeps every failing example's exception until the check ends,
            # and with it every frame's locals: results of any size.  Keep the frames
            # (for the traceback), not their locals.
            traceback.clear_frames(error.__traceback__)
            local = error
        if self.cluster is None:
            if local is not None:
                raise local
            return inconclusive
        where = case.describe() if isinstance(case, Case) else ""
        failure = explore.agreed(self.cluster, self.check_id, local, where)
        if failure is None:
            return inconclusive
        if isinstance(failure, ImplementationHung):
            self.runner.hung = self.runner.hung or f"a call hung on another process {where}".rstrip()
        raise failure

    def _run_one(self, record: CheckVerdict, case: Case | str | None) -> None:
        why = self._step(case, lambda: CHECKS[record.id].body(self, case))
        if why is not None:
            self._skip(record, Status.INCONCLUSIVE, f"inconclusive: {why}")

    def hypothesis_options(self, check: Check) -> dict[str, Any]:
        return explore.hypothesis_options(self.profile, check, cluster=self.cluster is not None)

    @property
    def shrink_seconds(self) -> float:
        """How long a failing history of calls may be shrunk under this run's profile."""
        return explore.SHRINK_SECONDS.get(self.profile, explore.SHRINK_SECONDS["default"])

    def judge(self, check: Check, record: CheckVerdict, case: Case, inconclusive: list[str]) -> None:
        """One input through the check's body, counted in its cell."""
        where = coverage.cell_of(case)
        cell = str(where)
        hits = sum(self._hits.get(check.id, {}).values())
        record.coverage[cell] = record.coverage.get(cell, 0) + 1
        klass = coverage.mesh_class(case.mesh)
        for axis, value in zip(coverage.PAIR_AXES[4:], coverage.axis_values(where, klass)[4:], strict=True):
            record.mesh_classes[f"{axis}: {value}"] = record.mesh_classes.get(f"{axis}: {value}", 0) + 1
        self._pairs_seen.setdefault(check.id, set()).update(coverage.pairs_of(where, klass))
        try:
            why = self._step(case, lambda: check.body(self, case))
        finally:
            self.pool.remember(case)
        if sum(self._hits.get(check.id, {}).values()) > hits:  # not judged after all (jax_bugs.py)
            record.coverage[cell] -= 1
            if not record.coverage[cell]:
                del record.coverage[cell]
        if why is not None:
            inconclusive.append(why)

    def _pairs(self, check: Check) -> dict[str, list[int]]:
        """Per pair of axes (one a mesh class's): the value pairs judged, of those the domain has."""
        import jax

        devices = len(jax.devices())
        assert check.domain is not None
        possible = self._possible.get(check.domain.name)
        if possible is None:
            possible = self._possible[check.domain.name] = set()
            for cell in self.cells(check):
                for klass in mesh_variants(cell.mesh, devices):
                    possible |= coverage.pairs_of(cell, klass)
        seen = self._pairs_seen.get(check.id, set()) & possible
        counts: dict[str, list[int]] = {}
        for pairs, index in ((possible, 1), (seen, 0)):
            for a, _, b, _ in pairs:
                counts.setdefault(f"{a} x {b}", [0, 0])[index] += 1
        return counts

    def cells(self, check: Check) -> list[coverage.Cell]:
        import jax

        assert check.domain is not None and check.domain.axes is not None
        return check.domain.axes.cells(
            self.contract,
            devices=len(jax.devices()),
            x64=bool(jax.config.read("jax_enable_x64")),
            seed=self.schedule.seed,
        )

    def _run_schedule(self, check: Check, record: CheckVerdict, inconclusive: list[str]) -> None:
        """Every cell of the check's domain gets the schedule's input (coverage.py).

        A failure is handed to Hypothesis, drawing in the failing cell with
        lengths up to the failing one, to shrink; if it finds none, the
        schedule's input is the counterexample (its token replays it exactly).
        """
        domain = check.domain
        if domain is None or domain.axes is None:
            return
        cells = self.cells(check)
        record.cells = len(cells)
        self.in_schedule = True
        try:
            for cell in cells:
                case = self.schedule.case(cell, divisible=domain.divisible)
                if not domain.accepts(case, self.contract):
                    continue
                record.scheduled += 1
                try:
                    self.judge(check, record, case, inconclusive)
                except CheckFailure as failure:
                    record.counterexample = repr(case)
                    self.in_schedule = False
                    self.shrink(check, record, cell, case)
                    raise failure from None
        finally:
            self.in_schedule = False
        record.unvisited = self.unvisited(check.id, record, cells)

    def _left_out(self, check: Check, record: CheckVerdict) -> list[str]:
        """What of a passing check's domain this run did not judge: the meshes its devices are too
        few for (full contract), and cells no input was judged in.  Any of it makes the run PARTIAL."""
        import jax

        left: list[str] = []
        count = len(jax.devices())
        axes = check.domain.axes if check.domain is not None else None
        if self.contract.takes_mesh and not check.gate:
            kinds = (axes.meshes if axes is not None else None) or coverage.MESHES
            short = {k: coverage.MESH_DEVICES[k] for k in kinds if coverage.MESH_DEVICES[k] > count}
            if short:
                kinds_text = " and ".join(
                    f"{coverage.MESH_NAMES[k]} meshes (need {n} devices)" for k, n in short.items()
                )
                left.append(f"inputs on {kinds_text}: {count} available (--devices)")
        if record.unvisited:
            left.append(f"{len(record.unvisited)} cell(s) of its domain got no judged input (listed below)")
        return left

    def unvisited(self, check_id: str, record: CheckVerdict, cells: Any) -> list[str]:
        """The cells no input of which was judged; JAX's known bugs' cells are counted apart."""
        excused = self._hit_cells.get(check_id, set())
        empty = [str(c) for c in sorted(cells) if not record.coverage.get(str(c))]
        record.not_judged = [c for c in empty if c in excused]
        return [c for c in empty if c not in excused]

    def shrink(self, check: Check, record: CheckVerdict, cell: coverage.Cell, failing: Case) -> None:
        """Look for the failure again in ``cell``, with lengths up to the failing one; raise the smallest."""
        import jax

        assert check.domain is not None
        domain = check.domain
        strategy = draw_cases(
            contract=self.contract,
            dtypes_from=[cell.dtype],
            mesh_kinds=[cell.mesh],
            placement_kinds=[cell.placement] if self.contract.takes_mesh else None,
            divisible=domain.divisible,
            max_length=failing.n,
            devices=jax.devices(),
        ).filter(lambda case: domain.accepts(case, self.contract))
        options = self.hypothesis_options(check)
        options.update(max_examples=explore.SHRINK_EXAMPLES, database=None)
        ignored: list[str] = []

        def shrink_in_cell(case: Case) -> None:
            record.examples += 1
            try:
                self.judge(check, record, case, ignored)
            except CheckFailure:
                record.counterexample = repr(case)
                raise

        explore.run_given(check, strategy, options, shrink_in_cell, cluster=self.cluster is not None)

    def _run_hypothesis(self, check: Check, record: CheckVerdict, inconclusive: list[str]) -> None:
        strategy = check.strategy(self.contract)
        domain = check.domain
        assert domain is not None
        contract = self.contract
        strategy = self.pool.widen(strategy, lambda example: domain.accepts(example, contract))

        def run_example(case: Case) -> None:
            record.examples += 1
            record.reused += self.pool.is_earlier(case)
            try:
                self.judge(check, record, case, inconclusive)
            except CheckFailure:
                record.counterexample = repr(case)
                raise

        explore.run_given(
            check, strategy, self.hypothesis_options(check), run_example, cluster=self.cluster is not None
        )
        if domain.axes is not None:
            record.unvisited = [c for c in record.unvisited if not record.coverage.get(c)]

    # -- searching a declared contract's draw (declared/draw.py) -----------------------
    def check_seed(self, check_id: str) -> int:
        return zlib.crc32(f"{self.schedule.seed}:{check_id}".encode())

    def search(
        self,
        strategy: Callable[..., st.SearchStrategy[Any]],
        body: Callable[[Any], None],
        *,
        share: float = 1.0,
        by_placement: bool = True,
    ) -> int:
        """Run ``body`` on examples of ``strategy``, the shrunk failure raised; return the count.

        First one example of each class, by construction: each of the first argument's dtypes
        (``strategy(dtype=name)``), where ``by_placement`` each placement kind it may come in
        (``strategy(placement=kind)``; ``numpy-forms``: each form), and each mesh class
        (``strategy(mesh_kind=kind)``, draw.MESH_KINDS), each drawn past the simplest example
        (``_past_the_simplest``); then the profile's examples of ``strategy()``, any of them.
        """
        first = self.contract.first
        cells: list[dict[str, str]] = []
        held = dtypes_held(first)  # 64-bit ones only with jax_enable_x64
        if len(held) > 1:
            cells += [{"dtype": name} for name in held]
        placements = [  # a NumPy array as users have them: each form its own cell
            name
            for kind in first.placements
            for name in ([f"{kind}/{form}" for form in NUMPY_FORMS] if kind == NUMPY_FORMS_KIND else [kind])
        ]
        if by_placement and len(placements) > 1:
            cells += [{"placement": name} for name in placements]
        cells += [{"mesh_kind": kind} for kind in MESH_KINDS]
        count = 0
        for cell in cells:
            salt = ",".join(cell.values())
            count += self._search(_past_the_simplest(strategy(**cell)), body, examples=1, salt=salt)
        examples = max(1, round(EXAMPLES.get(self.profile, EXAMPLES["default"]) * share))
        return count + self._search(strategy(), body, examples=examples, salt="")

    def search_once(
        self,
        strategy: st.SearchStrategy[Any],
        body: Callable[[Any], None],
        *,
        salt: str,
        examples: int | None = 1,
        share: float = HISTORY_SHARE,
        shrink: bool = True,
    ) -> int:
        """Run ``body`` on ``examples`` examples of ``strategy`` (None: the profile's examples
        times ``share``), the failure raised (shrunk where ``shrink``); return the count.  One
        example is never the simplest (``_past_the_simplest``): a planned history would otherwise
        be drawn with all-zero values, the smallest shapes and the first choices, every run."""
        if examples is None:
            examples = max(1, round(EXAMPLES.get(self.profile, EXAMPLES["default"]) * share))
        if examples == 1:
            strategy = _past_the_simplest(strategy)
        return self._search(strategy, body, examples=examples, salt=salt, shrink=shrink)

    def _search(
        self,
        strategy: st.SearchStrategy[Any],
        body: Callable[[Any], None],
        *,
        examples: int,
        salt: str,
        shrink: bool = True,
    ) -> int:
        count = [0]
        failed: list[CheckFailure] = []  # the latest failure, where Hypothesis ends in its own error
        judged: list[BaseException] = []  # what judging an example raised last (the rest: drawing)

        def one(example: Any) -> None:
            count[0] += 1
            self.history = self.called = None
            try:
                self._step(None, lambda: body(example))  # across processes: agreed by all (_step)
            except CheckFailure as failure:
                failed[:] = [failure]
                raise
            except BaseException as error:
                judged[:] = [error]  # the latest only: a failure's replay raises last
                raise

        test = settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=False,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
            # Across processes no shrinking: its time budget would stop processes at different tries.
            phases=[Phase.explicit, Phase.generate]
            if self.cluster is not None or not shrink
            else list(Phase),
        )(given(strategy)(one))
        budget = DECLARED_SHRINK_SECONDS.get(self.profile, DECLARED_SHRINK_SECONDS["default"])
        stopped = (
            f"(the kit stopped shrinking after {budget:g} s: the example above is the smallest it found)"
        )
        with internals.shrink_budget(budget, stopped):
            try:
                hypothesis_seed(self.check_seed(self.check_id + salt))(test)()
            except BaseExceptionGroup as group:  # flaky: the function's state changed the outcome
                first = failure_in(group)
                if first is None:
                    raise
                raise first from None
            except Flaky:  # a replay drew otherwise: the state left by earlier examples failed it sooner
                if not failed:
                    raise
                raise failed[0] from None
            except (CheckFailure, KitError, NotApplicable, ImplementationHung):
                raise
            except Exception as error:
                if any(error is e for e in judged):
                    raise
                raise KitError(  # no call was made: the kit's own draw broke, not the function
                    f"conformance: the kit could not draw an input of {self.check_id} for this "
                    f"contract ({type(error).__name__}: {error}); no call of the function was made: "
                    "the contract's own shape= functions or the kit raised it"
                ) from error
        return count[0]
