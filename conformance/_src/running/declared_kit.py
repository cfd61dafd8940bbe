"""The engine for a declared contract: the function under test, its calls, and running one check.

A ``DeclaredKit`` is made once per pytest session, as the ``Kit`` is for ``pjit_double``
(session/setup.py), when ``--contract`` names a ``conformance.contracts.Contract``.  Its
``run_check`` runs a check's body on inputs drawn from the contract (declared/draw.py), searched and
shrunk by Hypothesis under the run's profile, with a seed per check derived from the run's
(``--hypothesis-seed`` reruns it exactly), and records the verdict (``CheckVerdict``) that the
plug-in carries to the report.  Every call goes through the session's ``Runner``: its timeout,
its compile counter, and under supervision its call log, so a crash or hang names the check,
the input and the command that reruns it.
"""

from __future__ import annotations

import shlex
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from conformance._src import internals
from conformance._src.calling.calls import ImplementationHung, Outcome, Runner, finished
from conformance._src.calling.clocks import ahead
from conformance._src.calling.distributed import Cluster
from conformance._src.contract import messages
from conformance._src.contract.catalogue import CHECKS, CheckFailure
from conformance._src.declared.contract import Contract
from conformance._src.declared.draw import MESH_KINDS, Call, out_of_reach
from conformance._src.running import explore
from conformance._src.verdict import CheckVerdict, Status

# Examples per check and profile; a history counts as one example.
EXAMPLES = {"default": 20, "ci": 20, "thorough": 150}
# How long Hypothesis may shrink a failure, per profile: each try calls the function (compiles
# and all), and a default run of a declared contract stays within a minute.
SHRINK_SECONDS = {"default": 8.0, "ci": 15.0, "thorough": 60.0}
# The searched histories of fn.histories, as a share of EXAMPLES: each calls up to 2 * STEPS times.
HISTORY_SHARE = 0.3


class NotApplicable(Exception):
    """The check has nothing to judge in this contract (the message says why)."""


@dataclass
class DeclaredKit:
    impl: Callable[..., Any]
    spec: str  # --impl
    contract: Contract
    contract_spec: str  # --contract
    devices: int
    runner: Runner
    profile: str = "default"
    seed: int = 0  # the run's; each check's search is seeded from it
    records: dict[str, CheckVerdict] = field(default_factory=dict)
    check_id: str = ""
    history: list[Any] | None = None  # the history being judged (calls or steps), for messages
    replay: list[Any] | None = None  # its steps as called so far: the rerun line's --case token
    case: str | None = None  # --case: the history token fn.histories replays
    cluster: Cluster | None = None  # set in --distributed runs (conformance.launch)

    # -- calling the function ------------------------------------------------------
    def call(
        self, call: Call, arguments: list[Any] | None = None, *, clocks: int = 0
    ) -> tuple[list[Any], Outcome]:
        """Call the function on ``call``'s fresh arguments (or the given ones), its clocks
        ``clocks`` seconds ahead (calling/clocks.py); the outcome's ``error`` is what it raised."""
        args = call.arguments() if arguments is None else arguments
        kwargs, impl = call.keywords(), self.impl

        def one() -> Any:
            with ahead(clocks):
                return finished(impl(*args, **kwargs))

        outcome = self.run(call, one)
        return args, outcome

    def run(self, call: Call, fn: Callable[[], Any]) -> Outcome:
        """Run ``fn`` (which calls the function) on the runner's thread, as ``call`` does."""
        if self.runner.call_log is not None:
            self.runner.label = (self.check_id, call.describe(), self.rerun_command())
        try:
            return self.runner.run(f"the call on {call.describe()}", fn)
        except ImplementationHung as hung:
            self.fail(
                "the call did not return", call, expected="a result within --call-timeout", got=str(hung)
            )

    def result(self, call: Call, arguments: list[Any] | None = None) -> tuple[list[Any], Any]:
        args, outcome = self.call(call, arguments)
        if outcome.error is not None:
            self.fail_raised(call, outcome.error)
        return args, outcome.result

    def fail_raised(self, call: Call, error: BaseException) -> NoReturn:
        self.fail(
            "the call raised an exception",
            call,
            expected="a result",
            got=messages.one_line(f"{type(error).__name__}: {error}"),
            hint=_hint_for_raised(call, error),
        )

    # -- failures ------------------------------------------------------------------
    def fail(
        self, summary: str, call: Call | None, *, expected: str, got: str, hint: str | None = None
    ) -> NoReturn:
        text = messages.block(
            self.check_id,
            summary,
            history=self.history or None,
            case=call,
            expected=expected,
            got=got,
            hint=hint,
            rerun=self.rerun_command(),
        )
        if call is not None:
            text = text.replace("\n  expected:", f"\n  values:   {call.values_text()}\n  expected:", 1)
        raise CheckFailure(text)

    def check_seed(self, check_id: str) -> int:
        return zlib.crc32(f"{self.seed}:{check_id}".encode())

    def rerun_command(self) -> str:
        args = ["python", "-m", "pytest", "--pyargs", "conformance", "--impl", self.spec]
        args += ["--contract", self.contract_spec, "--devices", str(self.devices)]
        args += ["--check", self.check_id, f"--hypothesis-seed={self.seed}"]
        if self.replay:  # a history: exactly its calls, in a fresh process
            from conformance._src.declared import history

            args += ["--case", history.encode(self.replay)]
        return shlex.join(args)

    # -- running checks ------------------------------------------------------------
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
        (``strategy(placement=kind)``), and each mesh class (``strategy(mesh_kind=kind)``,
        draw.MESH_KINDS); then the profile's examples of ``strategy()``, any of them.
        """
        first = self.contract.first
        cells: list[dict[str, str]] = []
        if len(first.dtypes) > 1:
            cells += [{"dtype": name} for name in first.dtypes]
        if by_placement and len(first.placements) > 1:
            cells += [{"placement": kind} for kind in first.placements]
        cells += [{"mesh_kind": kind} for kind in MESH_KINDS]
        count = 0
        for cell in cells:
            salt = ",".join(cell.values())
            count += self._search(strategy(**cell), body, examples=1, salt=salt)
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
        times ``share``), the failure raised (shrunk where ``shrink``); return the count."""
        if examples is None:
            examples = max(1, round(EXAMPLES.get(self.profile, EXAMPLES["default"]) * share))
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

        def one(example: Any) -> None:
            count[0] += 1
            self.history = self.replay = None
            if self.cluster is None:
                body(example)
                return
            local: BaseException | None = None
            try:
                body(example)
            except (Exception, ImplementationHung) as error:
                local = error
            # Every process agrees on the example's verdict before Hypothesis sees it, and raises
            # the same exception from this one line, so that all of them stay in lockstep.
            failure = explore.agreed(self.cluster, self.check_id, local, "")
            if failure is not None:
                raise failure

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
        budget = SHRINK_SECONDS.get(self.profile, SHRINK_SECONDS["default"])
        stopped = (
            f"(the kit stopped shrinking after {budget:g} s: the example above is the smallest it found)"
        )
        with internals.shrink_budget(budget, stopped):
            hypothesis_seed(self.check_seed(self.check_id + salt))(test)()
        return count[0]

    def run_check(self, check_id: str) -> CheckVerdict:
        check = CHECKS[check_id]
        self.check_id = check_id
        record = self.records[check_id] = CheckVerdict(check_id, status=Status.PARTIAL)
        start = time.perf_counter()
        stats = self.runner.stats
        calls, compiles, in_impl = stats.calls, stats.compiles, stats.seconds_in_impl
        try:
            import jax

            if len(jax.devices()) < 2:
                reason = "not applicable: a sharded function needs 2 or more devices (--devices)"
                record.left_out = [reason.removeprefix("not applicable: ")]
                record.status, record.message = Status.NOT_APPLICABLE, reason
                pytest.skip(reason)
            try:
                record.examples = int(check.body(self, None) or 0)
            except NotApplicable as why:
                record.status, record.message = Status.NOT_APPLICABLE, f"not applicable: {why}"
                pytest.skip(record.message)
            record.status = Status.PASSED
            record.left_out = out_of_reach(self.contract)
            return record
        except CheckFailure as failure:
            record.status, record.message = Status.FAILED, str(failure).split("\n\nFalsifying", 1)[0]
            raise
        except Exception as error:  # the function broke the kit's own code
            record.status, record.message = Status.FAILED, f"{type(error).__name__}: {error}"
            raise
        finally:
            self.history = self.replay = None
            record.seconds = time.perf_counter() - start
            record.calls = stats.calls - calls
            record.compiles = stats.compiles - compiles
            record.seconds_in_impl = stats.seconds_in_impl - in_impl


def _hint_for_raised(call: Call, error: BaseException) -> str:
    """The hint for a function that raised on a call of its contract's domain."""
    said = str(error).lower()
    placed = [
        (arg.name, p)
        for arg, p in zip(call.contract.arguments, call.placements, strict=True)
        if p.kind not in ("layouts", "numpy")
    ]
    if placed and any(w in said for w in ("device", "sharding", "memory", "committed")):
        name, where = placed[0]
        return (
            f"{name} was {where.describe(call.mesh)}: an argument placed anywhere its contract "
            f"allows must be accepted; jax.device_put({name}, NamedSharding(mesh, layout)) moves it "
            f"before the jitted call"
        )
    return f"every input of the contract's domain must give a result ({call.contract.name})"
