"""From each check's test to the run's verdict: the CheckVerdict on each test report, --xfail-file,
pytest's progress letters, the terminal table, the report files and the exit status.

``pytest_runtest_logreport`` runs in the controller for pytest-xdist workers' tests too, so the
one Report gets every verdict, a crashed worker's included (supervision.py gives those).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance._src.session.state import (
    CONFIG,
    KIT_KEY,
    REPORT_KEY,
    SUPERVISOR_KEY,
    VERDICT_PROPERTY,
    XFAIL_KEY,
    controller_report,
)
from conformance._src.verdict import CheckVerdict, RunVerdict, Status, with_xfail

if TYPE_CHECKING:
    from conformance._src.calling.distributed import Ending
    from conformance._src.report import Report


def check_id(item: Any) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("check_id") if callspec is not None else None


def select_and_mark(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--check's selection, and --xfail-file's marks."""
    if KIT_KEY not in config.stash:
        return
    wanted = set(config.getoption("--check"))
    if wanted:
        dropped = [i for i in items if check_id(i) is not None and check_id(i) not in wanted]
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]
    for item in items:
        reason = config.stash.get(XFAIL_KEY, {}).get(check_id(item) or "")
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=AssertionError))


def verdict_of(report: pytest.TestReport | pytest.CollectReport) -> CheckVerdict | None:
    """The check's verdict a test's report carries; None for any other report (a collection
    report has no user properties: the plug-in is installed in every pytest run)."""
    for name, value in getattr(report, "user_properties", ()):
        if name == VERDICT_PROPERTY and isinstance(value, dict):
            return CheckVerdict.from_dict(value)
    return None


def shorten_failure(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """A failed check shows the kit's message block, not the kit's frames or Hypothesis's notes.

    The whole traceback is still there with ``--tb=long`` or ``-vv``.
    """
    if (
        KIT_KEY in item.config.stash
        and report.failed
        and call.excinfo is not None
        and item.config.getoption("tbstyle", "auto") not in ("long", "native")
        and item.config.getoption("verbose", 0) < 2
    ):
        from conformance._src.contract.catalogue import CheckFailure

        if isinstance(call.excinfo.value, CheckFailure):
            report.longrepr = str(call.excinfo.value).split("\n\nFalsifying", 1)[0]


def check_started(nodeid: str, location: Any) -> None:
    report = controller_report()
    if report is not None and "test_check[" in nodeid:
        check = nodeid.rpartition("[")[2].rstrip("]")
        report.started(check)
        kit = CONFIG["config"].stash.get(KIT_KEY, None)
        if kit is not None and kit.cluster is not None and kit.runner.call_log is not None:
            kit.runner.call_log.end(check)  # this check runs now: no earlier call of it is in flight
        _leave_for_launcher(report)


def _leave_for_launcher(report: Any) -> None:
    """In a job that ``conformance.launch`` watches, the Report so far, for the verdict of an ending."""
    from conformance._src.calling.distributed import save_report, state_dir

    config = CONFIG["config"]
    kit = config.stash.get(KIT_KEY, None)
    folder = state_dir()
    if folder is None or kit is None or kit.cluster is None:
        return
    path = config.getoption("--conformance-report")
    if path:
        path = os.path.join(str(config.invocation_params.dir), path)
    save_report(folder, kit.cluster.process_id, report, path, config.getoption("--call-timeout"))


def collect(report: pytest.TestReport) -> None:
    """Collect each check's verdict; runs in the controller for pytest-xdist workers' tests too."""
    run_report = controller_report()
    verdict = verdict_of(report)
    if run_report is None or verdict is None:
        return
    if report.when not in ("call", "???"):  # "???": pytest-xdist's report for a crashed worker's test
        return
    config = CONFIG["config"]
    run_report.add(with_xfail(verdict, config.stash.get(XFAIL_KEY, {})))
    _leave_for_launcher(run_report)
    _show_root_cause_once(report, verdict, run_report)


def _show_root_cause_once(report: pytest.TestReport, verdict: CheckVerdict, run_report: Any) -> None:
    """A failure with the same cause as an earlier check's is one line, not another copy of the block."""
    if verdict.status not in (Status.FAILED, Status.CRASHED) or not verdict.message:
        return
    lines = verdict.message.splitlines()
    # The same summary, expectation, outcome and hint: one cause, whatever the input.
    cause = tuple(line for line in lines[1:] if line.lstrip().startswith(("expected:", "got:", "hint:")))
    summary = lines[0].split("] ", 1)[-1]
    seen: dict[tuple[str, ...], str] = run_report.__dict__.setdefault("_causes", {})
    first = seen.setdefault((summary, *cause), verdict.id)
    if first != verdict.id and isinstance(report.longrepr, str):
        report.longrepr = f"[{verdict.id}] {summary}: the same failure as [{first}] above"


def teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """pytest's progress line names the kit's status (crashed, inconclusive, not applicable ...)."""
    verdict = verdict_of(report)
    if verdict is None or report.when not in ("call", "???"):
        return None
    verdict = with_xfail(verdict, config.stash.get(XFAIL_KEY, {}))
    letters = {
        Status.PASSED: ".",
        Status.FAILED: "F",
        Status.CRASHED: "C",
        Status.XFAILED: "x",
        Status.INCONCLUSIVE: "i",
        Status.NOT_APPLICABLE: "n",
        Status.NOT_RUN: "s",
    }
    category = {
        Status.PASSED: "passed",
        Status.FAILED: "failed",
        Status.CRASHED: "failed",
        Status.XFAILED: "xfailed",
        Status.KIT_ERROR: "error",  # a failed pytest report: "skipped" breaks pytest's -rs summary
    }.get(verdict.status, "skipped")
    return category, letters.get(verdict.status, "?"), verdict.status.value.upper()


def session_started(session: pytest.Session) -> None:
    CONFIG["config"] = session.config
    if REPORT_KEY in session.config.stash and not hasattr(session.config, "workerinput"):
        # A piped run (a CI log) shows each check's verdict as it ends.
        option = session.config.option
        option.verbose = max(option.verbose, 1)


def terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    report = controller_report()
    if report is None:
        return
    kit = config.stash.get(KIT_KEY, None)
    if kit is not None and kit.cluster is not None and kit.cluster.process_id != 0:
        return  # process 0 speaks for the cluster
    if report.duration < 0:
        report.duration += time.perf_counter()
    from conformance._src.report import title

    terminalreporter.section(title(report))
    # pytest's FAILURES section above printed each failure's block, unless --tb=no left it out.
    blocks = config.getoption("tbstyle") == "no"
    write_summary(
        report, config.getoption("--conformance-report"), terminalreporter.write_line, blocks=blocks
    )


def write_summary(report: Any, path: str | None, line: Callable[[str], Any], *, blocks: bool = True) -> None:
    """The table, the timing line, the report files and the headline, a ``line`` each
    (pytest's terminal summary, and ``conformance.launch``'s for a job that ended early); each
    failure's block where ``blocks`` (the report files have them always)."""
    from conformance._src import report as reporting

    line(reporting.markdown(report, blocks=blocks).rstrip("\n"))
    line("timing: " + reporting.timing_summary(report))
    if path:
        for written in reporting.write(report, path):
            line(f"report written to {written}")
    line(f"conformance: {reporting.headline(report)}")


def set_exit_status(session: pytest.Session) -> None:
    """The exit status is the run's verdict: 0 conforming, 1 not conforming, 2 partial."""
    report = controller_report()
    if report is not None and session.exitstatus in (0, 1, 2, 5):
        verdict: RunVerdict = report.verdict
        session.exitstatus = verdict.exit_status
    CONFIG["exitstatus"] = session.exitstatus  # type: ignore[assignment]
    if KIT_KEY in session.config.stash:
        # pytest's unraisable-exception plug-in collects five times at exit,
        # ~0.3 s each over this heap; what the checks made is done with.
        gc.collect()
        gc.freeze()


def unconfigure(config: pytest.Config) -> None:
    kit = config.stash.get(KIT_KEY, None)
    if kit is not None and kit.cluster is not None:
        from conformance._src.calling.distributed import mark_done, state_dir

        folder = state_dir()
        if folder is not None:
            mark_done(folder, kit.cluster.process_id)
    supervisor = config.stash.get(SUPERVISOR_KEY, None)
    if supervisor is not None:
        supervisor.stop()
    kit = config.stash.get(KIT_KEY, None)
    if kit is not None and kit.runner.hung:
        # A hung call still runs on the worker thread and may hold JAX's
        # runtime; interpreter shutdown could wait on it forever.  Everything
        # is reported by now, so leave at once with pytest's verdict.
        sys.stdout.flush()
        sys.stderr.flush()
        status = CONFIG.get("exitstatus", 1)
        os._exit(int(status) if isinstance(status, int) else 1)


def launcher_verdict(
    folder: Path, endings: list[Ending], rerun: Callable[[str], str]
) -> tuple[Report | None, str | None]:
    """The job's Report after a process died, with the running check's verdict; and its report path.

    ``None`` when no process got as far as its checks (then there is no check to name).
    ``rerun`` turns a one-process rerun command into the launcher's.
    """
    from conformance._src.calling.supervise import crash_verdict

    died = [e for e in endings if not e.done and not e.killed]
    states = {}
    for ending in endings:
        with contextlib.suppress(OSError, ValueError):
            states[ending.rank] = json.loads((folder / f"process-{ending.rank}.report.json").read_text())
    if not died or not states:
        return None, None
    report, path, timeout = _from_state(states[min(states)])  # process 0's, unless it never got there
    results = list(report.results.values())

    def log(rank: int, name: str) -> str | None:
        with contextlib.suppress(OSError):
            return (folder / f"process-{rank}.{name}").read_text()
        return None

    running = [v.id for v in results if v.status is Status.PARTIAL]
    entries = {e.rank: json.loads(log(e.rank, "json") or "{}") for e in died}
    check_id = running[0] if running else next((x["check"] for x in entries.values() if "check" in x), None)
    if check_id is None:
        return report, path
    # The process that died in a call speaks first; the others' endings follow in a line each.
    first = min(died, key=lambda e: ("deadline" not in entries[e.rank], e.rank))
    entry = dict(entries[first.rank])
    for key in ("rerun", "last_rerun"):
        if key in entry:
            entry[key] = rerun(entry[key])
    verdict = crash_verdict(
        check_id,
        entry,
        first.returncode,
        first.hung,
        log(first.rank, "fault"),
        timeout,
        process=f"process {first.rank} of {len(endings)}",
        after="the launcher ended the others; the checks after it did not run",
    )
    for other in endings:
        if other.rank != first.rank:
            how = (
                "ended by the launcher after that"
                if other.killed
                else "finished"
                if other.done
                else f"ended too: {describe(other)}"
            )
            verdict.message += f"\n  process {other.rank}: {how}"
    report.add(with_xfail(verdict, report.xfails))
    return report, path


def _from_state(state: dict[str, Any]) -> tuple[Report, str | None, float]:
    """A process's Report as it left it for the launcher (``save_report``), its report path and timeout."""
    from conformance._src.report import Report

    state = dict(state)
    results = [CheckVerdict.from_dict(v) for v in state.pop("results")]
    path, timeout = state.pop("report_path"), float(state.pop("timeout"))
    report = Report(**state)
    for verdict in results:
        report.add(verdict)
    return report, path, timeout


def state_report(folder: Path, rank: int) -> tuple[Report | None, str | None]:
    """Process ``rank``'s Report as it left it for the launcher, and its report path (None, None:
    it left none)."""
    try:
        state = json.loads((folder / f"process-{rank}.report.json").read_text())
    except (OSError, ValueError):
        return None, None
    report, path, _ = _from_state(state)
    return report, path


def describe(ending: Ending) -> str:
    """How one process ended, in words."""
    from conformance._src.calling.supervise import describe_exit

    return "hung in a call, ended by the launcher" if ending.hung else describe_exit(ending.returncode)
