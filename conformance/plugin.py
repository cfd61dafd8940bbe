"""The pytest plug-in: options, supervision, device set-up, ``--impl`` loading, verdicts.

Loaded by this repository's root conftest.py and, once installed, through
the ``pytest11`` entry point of the same name (so it is never registered
twice).  It stays dormant unless the run targets the conformance suite, so
installing the kit changes nothing in a project's other test runs.
Importing it must not start JAX's backend: the devices are made in
``pytest_configure``, before any test module is collected.

Data flow: ``--impl`` -> options.validate -> (supervised: the controller
probes ``--impl`` in a child process and starts one pytest-xdist worker,
supervise.py) -> loader -> Kit (kit.py) -> one test per check
(test_conformance.py) -> CheckVerdict (verdict.py) carried on the test
report -> Report (report.py) -> terminal table, ``--conformance-report``
files, exit status from the run's verdict.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from conformance import devices, internals, loader  # none imports Hypothesis: see below
from conformance.verdict import CheckVerdict, RunVerdict, Status

VERDICT_PROPERTY = "conformance"  # the user property that carries a CheckVerdict's dict

PACKAGE_DIR = Path(__file__).resolve().parent
KIT_KEY = pytest.StashKey[Any]()
REPORT_KEY = pytest.StashKey[Any]()
SUPERVISOR_KEY = pytest.StashKey[Any]()
PROBE_KEY = pytest.StashKey[Any]()
XFAIL_KEY = pytest.StashKey[dict[str, str]]()


def _register_profiles() -> None:
    """Hypothesis's own --hypothesis-profile must find the kit's profile names;
    the kit's settings for them live in kit.PROFILES.  A project's own profile
    of the same name is left alone."""
    from hypothesis import settings

    for name in ("ci", "thorough"):
        try:
            settings.get_profile(name)
        except Exception:  # noqa: BLE001 -- InvalidArgument: not registered yet
            settings.register_profile(name, deadline=None)


internals.leave_hypothesis_unrewritten()
_register_profiles()


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.register(_SupervisionHooks(), "conformance-supervision")
    group = parser.getgroup("conformance", "pjit_double conformance kit")
    group.addoption(
        "--impl",
        default=None,
        metavar="MODULE:ATTR",
        help="implementation to check: MODULE:ATTR or path/to/file.py:ATTR "
        f"(default: ${loader.ENV_VAR}, then {loader.DEFAULT_SPEC})",
    )
    group.addoption(
        "--contract",
        default="full",
        choices=["seed", "full"],  # conformance.contract.Contract's values (importing it imports JAX)
        help="seed: the exercise as written; full: plus mesh=, dtypes, placements (default)",
    )
    group.addoption(
        "--devices",
        type=int,
        default=devices.DEFAULT_DEVICES,
        metavar="N",
        help=f"forced CPU devices to test on (default {devices.DEFAULT_DEVICES})",
    )
    group.addoption(
        "--call-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a call of the implementation that takes longer fails as hung (default 60)",
    )
    group.addoption(
        "--check", action="append", default=[], metavar="ID", help="run only this check (repeatable)"
    )
    group.addoption(
        "--case",
        default=None,
        metavar="TOKEN",
        help="replay exactly one example (printed in failure messages); needs one --check",
    )
    group.addoption(
        "--list-checks",
        action="store_true",
        default=False,
        help="print the check IDs with their contracts and exit",
    )
    group.addoption(
        "--conformance-report",
        default=None,
        metavar="PATH",
        help="write the verdicts as JSON; a .md PATH gets Markdown and JSON beside it",
    )
    group.addoption(
        "--xfail-file",
        default=None,
        metavar="FILE",
        help="lines of 'CHECK-ID  reason': those checks are expected to fail",
    )
    group.addoption(
        "--distributed",
        action="store_true",
        default=False,
        help="run as one process of a multi-process JAX job (jax.distributed); "
        "--devices is then the count per process",
    )
    group.addoption(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="with --distributed: the coordinator (default: found by jax.distributed)",
    )
    group.addoption("--num-processes", type=int, default=None, metavar="N", help="with --distributed")
    group.addoption("--process-id", type=int, default=None, metavar="I", help="with --distributed")
    # For the user's own tests of sharded code (README, "Testing your own sharded functions").
    group.addoption(
        "--host-devices",
        type=int,
        default=None,
        metavar="N",
        help="your own tests: run them on N forced CPU devices (the host_devices fixture gives them); "
        "default: the host_devices ini value, else JAX's own devices",
    )
    parser.addini(
        "host_devices", "forced CPU devices for this project's tests (as --host-devices)", default=""
    )


def host_device_count(config: pytest.Config) -> int | None:
    """``--host-devices``, else the ``host_devices`` ini value, else None (JAX's own devices)."""
    count = config.getoption("--host-devices")
    if count is None:
        text = str(config.getini("host_devices")).strip()
        if not text:
            return None
        try:
            count = int(text)
        except ValueError:
            raise pytest.UsageError(
                f"host_devices = {text!r} in the pytest configuration is not a number"
            ) from None
    return int(count)


def _configure_host_devices(config: pytest.Config) -> None:
    """The user's own run: make the forced CPU devices before any test module imports JAX's arrays."""
    count = host_device_count(config)
    if count is None:
        return
    try:
        devices.ensure_host_devices(count)
    except devices.DeviceSetupError as exc:
        raise pytest.UsageError(
            f"--host-devices {count}: {exc}".replace("--devices", "--host-devices")
        ) from None


@pytest.fixture(scope="session")
def host_devices(request: pytest.FixtureRequest) -> list[Any]:
    """The devices of this run: N forced CPU devices with ``--host-devices N`` (or the
    ``host_devices`` ini value), else whatever JAX has.  Made before any test module was
    imported; a backend already started with another count is a usage error, not fewer devices.
    One device that nobody asked for fails the test that asks for them: a test of sharding on one
    device passes whatever the layout (``--host-devices 1`` asks for one on purpose)."""
    import jax

    found = list(jax.devices())
    if len(found) < 2 and host_device_count(request.config) is None:
        from conformance.strategies import one_device_only

        pytest.fail(one_device_only("the host_devices fixture"), pytrace=False)
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if config.getoption("--list-checks"):
        from conformance import checks  # noqa: F401 -- registers the checks
        from conformance.report import print_checks

        print_checks()
        return 0
    return None


def _targets_kit(config: pytest.Config) -> bool:
    """Does this run collect the conformance suite (or ask for it with --impl or --check)?"""
    if config.getoption("--impl") is not None or config.getoption("--check"):
        return True
    return _collects_suite(config)


def _collects_suite(config: pytest.Config) -> bool:
    """Do this run's arguments include the conformance suite?"""
    for arg in config.args:
        target = arg.split("::")[0]
        if config.getoption("pyargs", False) and target.split(".")[0] == "conformance":
            return True
        path = Path(config.invocation_params.dir, target).resolve()
        if path == PACKAGE_DIR or PACKAGE_DIR in path.parents or path in PACKAGE_DIR.parents:
            return True
    return False


def _supervised_after_xdist(config: pytest.Config) -> bool:
    """Will pytest-xdist (whose own pytest_cmdline_main has not run yet) start workers?"""
    if hasattr(config, "workerinput") or not hasattr(config.option, "numprocesses"):
        return False
    if config.getoption("--list-checks") or config.getoption("collectonly", False):
        return False
    n = config.option.numprocesses
    return bool(n) or bool(getattr(config.option, "tx", None)) or getattr(config.option, "dist", "no") != "no"


def _supervised(config: pytest.Config) -> bool:
    """Will the checks run in pytest-xdist workers that this process watches?"""
    return bool(getattr(config.option, "tx", None)) and getattr(config.option, "dist", "no") != "no"


def _leave_usage_summary(config: pytest.Config, error: pytest.UsageError) -> None:
    """A run of the suite that stops at a usage error leaves its one line at a ``.md`` report path."""
    path = config.getoption("--conformance-report")
    if path and _targets_kit(config):
        from conformance.report import write_usage_error

        write_usage_error(str(error), path)


class _SupervisionHooks:
    """Hooks that must run around or beside pytest-xdist's own (supervise.py says why)."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> Generator[None, Any, Any]:
        if _targets_kit(config) and not config.getoption("--list-checks"):
            from conformance import options

            try:
                options.validate(config)  # every option, before anything runs
            except pytest.UsageError as error:
                _leave_usage_summary(config, error)
                raise
        # Before pytest-xdist reads -n: a run of the suite gets one worker to watch,
        # unless it asked for workers itself, for none (-n 0), or runs as one
        # process of a multi-process job (--distributed: conformance.launch watches).
        if (
            not hasattr(config, "workerinput")
            and hasattr(config.option, "numprocesses")
            and config.option.numprocesses is None
            and not config.getoption("--list-checks")
            and not config.getoption("--distributed")
            and not config.getoption("usepdb", False)
            and not config.getoption("collectonly", False)
            and _targets_kit(config)
        ):
            config.option.numprocesses = 1
        if _targets_kit(config) and _supervised_after_xdist(config):
            from conformance.supervise import Probe

            # Load --impl in a child while this process starts up (it never loads it itself).
            cli = config.getoption("--impl")
            spec = loader.choose_spec(cli)
            config.stash[PROBE_KEY] = Probe.start(
                spec, config.getoption("--devices"), loader.spec_origin(cli)
            )
        if (
            hasattr(config.option, "maxworkerrestart")
            and config.option.maxworkerrestart is None
            and _targets_kit(config)
        ):
            from conformance import checks  # noqa: F401 -- registers the checks
            from conformance.registry import CHECKS

            # Every check may crash its worker once, and all of them still get a verdict.
            config.option.maxworkerrestart = str(2 * len(CHECKS))
        try:
            return (yield)
        except pytest.UsageError as error:
            _leave_usage_summary(config, error)
            raise
        finally:
            probe = config.stash.get(PROBE_KEY, None)
            if probe is not None:
                probe.cancel()  # a no-op once its result was read

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        supervisor = node.config.stash.get(SUPERVISOR_KEY, None)
        if supervisor is not None:
            from conformance.supervise import STATE_DIR_KEY

            node.workerinput[STATE_DIR_KEY] = str(supervisor.state_dir)
        node.workerinput[SCHEDULE_SEED] = _schedule_seed(node.config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        supervisor = node.config.stash.get(SUPERVISOR_KEY, None)
        if supervisor is not None:
            supervisor.worker_ready(node)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        supervisor = node.config.stash.get(SUPERVISOR_KEY, None)
        if supervisor is not None:
            supervisor.worker_down(node)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A worker died while running ``crashitem``: give that check its verdict."""
        config = _CONFIG.get("config")
        supervisor = config.stash.get(SUPERVISOR_KEY, None) if config is not None else None
        if supervisor is None or "test_check[" not in crashitem:
            return
        from conformance.registry import CHECKS

        verdict = supervisor.crash_verdict(crashitem, report.node)  # type: ignore[attr-defined]
        report.longrepr = verdict.message
        report.user_properties.append((VERDICT_PROPERTY, verdict.to_dict()))
        if verdict.id in CHECKS and CHECKS[verdict.id].gate:
            supervisor.remember_crashed_gate(verdict)


def _read_xfail_file(path: str, known: dict[str, Any]) -> dict[str, str]:
    from conformance.options import read_xfail_file  # checked there first, before anything runs

    return read_xfail_file(path, known)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not _targets_kit(config):
        _configure_host_devices(config)
        return
    from conformance import checks  # noqa: F401 -- registers the checks
    from conformance.registry import CHECKS

    if config.getoption("--case") and len(config.getoption("--check")) != 1:
        raise pytest.UsageError("--case replays one example of one check: give exactly one --check ID")
    unknown = [c for c in config.getoption("--check") if c not in CHECKS]
    if unknown:
        raise pytest.UsageError(f"--check {unknown[0]}: no such check (pytest --list-checks prints them)")
    if config.getoption("--xfail-file"):
        config.stash[XFAIL_KEY] = _read_xfail_file(config.getoption("--xfail-file"), CHECKS)
    if config.getoption("--impl") is not None and not _collects_suite(config):
        raise pytest.UsageError(
            "--impl: this run does not collect the conformance suite; select it with "
            "`python -m pytest --pyargs conformance --impl ...` (or give the path of the installed "
            "conformance package)"
        )
    _keep_hypothesis_out_of_the_working_directory()
    _keep_pytest_cache_out_of_the_users_folder(config)
    spec = loader.choose_spec(config.getoption("--impl"))
    if _supervised(config) and not hasattr(config, "workerinput"):
        _configure_controller(config, spec)
    else:
        _configure_checks(config, spec)
    # JAX, XLA's bindings and the implementation make a large heap that lives
    # as long as the run: keep it out of every later garbage collection.
    gc.collect()
    gc.freeze()


def _cache_root() -> str:
    """``$CONFORMANCE_CACHE_DIR``, else ``$XDG_CACHE_HOME`` (or ``~/.cache``) ``/pjit-double-conformance``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("CONFORMANCE_CACHE_DIR") or os.path.join(cache, "pjit-double-conformance")


def _keep_hypothesis_out_of_the_working_directory() -> None:
    """Hypothesis's files (example database, caches) go to the user's cache folder, not ./.hypothesis.

    ``$HYPOTHESIS_STORAGE_DIRECTORY`` still wins; else ``_cache_root()/hypothesis``.  The ``ci``
    profile keeps no example database at all.
    """
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(os.path.join(_cache_root(), "hypothesis"))


def _keep_pytest_cache_out_of_the_users_folder(config: pytest.Config) -> None:
    """A run of the suite from outside the kit's own checkout leaves no ``.pytest_cache`` there:
    pytest's cache goes to ``_cache_root()/pytest``."""
    root = Path(config.rootpath).resolve()
    if root == PACKAGE_DIR.parent or PACKAGE_DIR.parent in root.parents:
        return  # the kit's own checkout: its .pytest_cache is ignored by git
    internals.move_pytest_cache(config, os.path.join(_cache_root(), "pytest"))


SCHEDULE_SEED = "conformance_schedule_seed"  # in a pytest-xdist worker's workerinput
SCHEDULE_SEED_KEY = pytest.StashKey[int]()


def _schedule_seed(config: pytest.Config) -> int:
    """The covering schedule's seed: a worker gets its controller's; --hypothesis-seed gives it;
    the ``ci`` profile and --distributed runs fix it (0); else a new one each run."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and SCHEDULE_SEED in workerinput:
        return int(workerinput[SCHEDULE_SEED])
    if SCHEDULE_SEED_KEY in config.stash:
        return config.stash[SCHEDULE_SEED_KEY]

    given = config.getoption("hypothesis_seed", None)
    if given is not None:
        chosen = int(given) if str(given).isdigit() else zlib.crc32(str(given).encode())
    elif internals.hypothesis_profile_name() == "ci" or config.getoption("--distributed"):
        chosen = 0
    else:
        chosen = random.SystemRandom().getrandbits(32)
    config.stash[SCHEDULE_SEED_KEY] = chosen
    return chosen


def _new_report(config: pytest.Config, spec: str, impl_version: str | None, count: int) -> Any:

    from conformance.registry import CHECKS
    from conformance.report import Report

    profile = internals.hypothesis_profile_name() or "unknown"
    seed = config.getoption("hypothesis_seed", None)
    distributed = config.getoption("--distributed")
    xfails = config.stash.get(XFAIL_KEY, {})
    report = Report(
        spec=spec,
        impl_version=impl_version,
        contract=config.getoption("--contract"),
        profile=profile,
        seed=str(seed) if seed is not None else ("derandomized" if profile == "ci" or distributed else None),
        devices=count,
        expected=list(CHECKS),
        xfails=dict(xfails),
        schedule_seed=_schedule_seed(config),
    )
    report.duration = -time.perf_counter()
    config.stash[REPORT_KEY] = report
    return report


def _configure_controller(config: pytest.Config, spec: str) -> None:
    """The watching process: probe --impl in a child, start the watchdog; the workers run the checks."""
    from conformance.supervise import Probe, Supervisor

    timeout = config.getoption("--call-timeout")
    origin = loader.spec_origin(config.getoption("--impl"))
    probe = config.stash.get(PROBE_KEY, None) or Probe.start(spec, config.getoption("--devices"), origin)
    found = probe.result(timeout=max(60.0, timeout))
    report = _new_report(config, spec, found.impl_version, found.devices)
    report.backend, report.device_kind, report.supervised = found.backend, found.device_kind, True
    supervisor = Supervisor(timeout=timeout, show_progress=not sys.stdout.isatty())
    supervisor.start()
    config.stash[SUPERVISOR_KEY] = supervisor


def _configure_checks(config: pytest.Config, spec: str) -> None:
    """The process that runs the checks: a supervised worker, or the whole run with -n 0 / --distributed."""
    from conformance import supervise
    from conformance.calls import Runner
    from conformance.kit import Kit

    count = config.getoption("--devices")
    distributed = config.getoption("--distributed")
    if distributed:
        from conformance.distributed import initialize

        try:
            initialize(
                coordinator=config.getoption("--coordinator"),
                num_processes=config.getoption("--num-processes"),
                process_id=config.getoption("--process-id"),
                local_devices=count,
            )
        except Exception as exc:  # noqa: BLE001 -- any failure to join is a usage problem
            raise pytest.UsageError(
                f"conformance: --distributed: jax.distributed.initialize failed: {str(exc).splitlines()[0]}"
            ) from None
    try:
        found = devices.ensure_host_devices(count, local=distributed)
    except devices.DeviceSetupError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None
    try:
        impl = loader.load_impl(spec, loader.spec_origin(config.getoption("--impl")))
    except loader.ImplSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    from conformance.contract import Contract

    contract = Contract(config.getoption("--contract"))
    timeout = config.getoption("--call-timeout")
    workerinput = getattr(config, "workerinput", None)
    call_log = supervise.call_log_for(workerinput)
    cluster = None
    if distributed:
        from conformance.distributed import Cluster

        # Wait for the slowest process: its own call may take up to a timeout.
        cluster = Cluster.current(timeout=2 * timeout + 30)

    from conformance.schedule import Schedule

    config.stash[KIT_KEY] = kit = Kit(
        impl=impl,
        spec=spec,
        contract=contract,
        devices=count,
        # Watched by a supervisor, the watchdog ends a call at the timeout (GIL
        # held or not); the runner's own limit is only a fallback behind it.
        runner=Runner(timeout=timeout if call_log is None else 2 * timeout + 30),
        user_timeout=timeout,
        profile=internals.hypothesis_profile_name() or "unknown",
        replay=config.getoption("--case"),
        cluster=cluster,
        crashed_gates=supervise.crashed_gates(workerinput),
        schedule=Schedule(_schedule_seed(config), contract),
        selected=frozenset(config.getoption("--check")) or None,
    )
    if call_log is not None:
        call_log.catch_fatal_errors()
        kit.runner.call_log, kit.runner.watch_timeout = call_log, timeout
    if workerinput is None:
        import jax

        report = _new_report(config, spec, loader.module_version(impl), len(jax.devices()))
        report.backend, report.device_kind = found[0].platform, found[0].device_kind
        report.process_count = jax.process_count()  # in a cluster: every process's devices above


def _check_id(item: Any) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("check_id") if callspec is not None else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if KIT_KEY not in config.stash:
        return
    wanted = set(config.getoption("--check"))
    if wanted:
        dropped = [i for i in items if _check_id(i) is not None and _check_id(i) not in wanted]
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]
    for item in items:
        reason = config.stash.get(XFAIL_KEY, {}).get(_check_id(item) or "")
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=AssertionError))


@pytest.fixture(scope="session")
def conformance_kit(request: pytest.FixtureRequest) -> Any:
    kit = request.config.stash.get(KIT_KEY, None)
    if kit is None:
        pytest.skip("the conformance kit is not active in this run")
    return kit


def _verdict_of(report: pytest.TestReport) -> CheckVerdict | None:
    for name, value in report.user_properties:
        if name == VERDICT_PROPERTY and isinstance(value, dict):
            return CheckVerdict.from_dict(value)
    return None


def _with_xfail(verdict: CheckVerdict, xfails: dict[str, str]) -> CheckVerdict:
    """Apply --xfail-file: a listed failure is expected; a listed pass fails (the file must not go stale)."""
    reason = xfails.get(verdict.id)
    if reason is None:
        return verdict
    verdict.xfail_reason = reason
    if verdict.status is Status.FAILED:
        verdict.status = Status.XFAILED
    elif verdict.status is Status.PASSED:
        verdict.status = Status.FAILED
        verdict.message = (
            f"[{verdict.id}] passed, but --xfail-file lists it as expected to fail ({reason}); "
            f"remove its line from the file"
        )
    return verdict


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A failed check shows the kit's message block, not the kit's frames or Hypothesis's notes.

    The whole traceback is still there with ``--tb=long`` or ``-vv``.
    """
    report: pytest.TestReport = yield
    if (
        KIT_KEY in item.config.stash
        and report.failed
        and call.excinfo is not None
        and item.config.getoption("tbstyle", "auto") not in ("long", "native")
        and item.config.getoption("verbose", 0) < 2
    ):
        from conformance.registry import CheckFailure

        if isinstance(call.excinfo.value, CheckFailure):
            report.longrepr = str(call.excinfo.value).split("\n\nFalsifying", 1)[0]
    return report


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    report = _controller_report()
    if report is not None and "test_check[" in nodeid:
        report.started(nodeid.rpartition("[")[2].rstrip("]"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect each check's verdict; runs in the controller for pytest-xdist workers' tests too."""
    run_report = _controller_report()
    verdict = _verdict_of(report)
    if run_report is None or verdict is None:
        return
    if report.when not in ("call", "???"):  # "???": pytest-xdist's report for a crashed worker's test
        return
    config = _CONFIG["config"]
    run_report.add(_with_xfail(verdict, config.stash.get(XFAIL_KEY, {})))
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


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """pytest's progress line names the kit's status (crashed, inconclusive, not applicable ...)."""
    verdict = _verdict_of(report)
    if verdict is None or report.when not in ("call", "???"):
        return None
    verdict = _with_xfail(verdict, config.stash.get(XFAIL_KEY, {}))
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
    }.get(verdict.status, "skipped")
    return category, letters.get(verdict.status, "?"), verdict.status.value.upper()


_CONFIG: dict[str, pytest.Config] = {}


def _controller_report() -> Any:
    """The run's Report, in the process that writes it (not in a pytest-xdist worker)."""
    config = _CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):
        return None
    return config.stash.get(REPORT_KEY, None)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config
    if REPORT_KEY in session.config.stash and not hasattr(session.config, "workerinput"):
        # A piped run (a CI log) shows each check's verdict as it ends.
        option = session.config.option
        option.verbose = max(option.verbose, 1)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    report = _controller_report()
    if report is None:
        return
    kit = config.stash.get(KIT_KEY, None)
    if kit is not None and kit.cluster is not None and kit.cluster.process_id != 0:
        return  # process 0 speaks for the cluster
    from conformance import report as reporting

    if report.duration < 0:
        report.duration += time.perf_counter()
    terminalreporter.section("pjit_double conformance")
    terminalreporter.write(reporting.markdown(report))
    terminalreporter.write_line("timing: " + reporting.timing_summary(report))
    path = config.getoption("--conformance-report")
    if path:
        for written in reporting.write(report, path):
            terminalreporter.write_line(f"report written to {written}")
    terminalreporter.write_line(f"conformance: {reporting.headline(report)}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Generator[None, Any, Any]:
    """The exit status is the run's verdict: 0 conforming, 1 not conforming, 2 partial."""
    report = _controller_report()
    if report is not None and session.exitstatus in (0, 1, 2, 5):
        verdict: RunVerdict = report.verdict
        session.exitstatus = verdict.exit_status
    _CONFIG["exitstatus"] = session.exitstatus  # type: ignore[assignment]
    if KIT_KEY in session.config.stash:
        # pytest's unraisable-exception plug-in collects five times at exit,
        # ~0.3 s each over this heap; what the checks made is done with.
        gc.collect()
        gc.freeze()
    return (yield)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
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
        status = _CONFIG.get("exitstatus", 1)
        os._exit(int(status) if isinstance(status, int) else 1)
