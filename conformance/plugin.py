"""The pytest plug-in: options, device set-up, ``--impl`` loading, verdicts.

Loaded by this repository's root conftest.py and, once installed, through
the ``pytest11`` entry point of the same name (so it is never registered
twice).  It stays dormant unless the run targets the conformance suite, so
installing the kit changes nothing in a project's other test runs.
Importing it must not start JAX's backend: the devices are made in
``pytest_configure``, before any test module is collected.

Data flow: ``--impl`` -> loader -> Kit (kit.py) -> one test per check
(test_conformance.py) -> pytest reports -> Report (report.py) -> terminal
table, ``--conformance-report`` files, exit status.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conformance import devices, loader  # neither imports Hypothesis: see below
from conformance.contract import Contract


def _leave_hypothesis_unrewritten() -> None:
    """Let Hypothesis's modules load as they are, not through pytest's assert rewriting.

    pytest rewrites the asserts of every module in a distribution that has a
    ``pytest11`` entry point, Hypothesis's ~90 included.  Where bytecode is not
    written (PYTHONDONTWRITEBYTECODE) that is redone on every run: ~2 s of a
    ~30 s suite.  Hypothesis's internal asserts carry no verdict; a pytest
    without this (private) attribute is left as it is.  This happens wherever
    the plug-in is installed; in other runs its only effect is plain messages
    from an assert that fails inside Hypothesis itself.
    """
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and "hypothesis" in marked and "hypothesis" not in sys.modules:
            marked.discard("hypothesis")
            getattr(finder, "_marked_for_rewrite_cache", {}).clear()


PACKAGE_DIR = Path(__file__).resolve().parent
KIT_KEY = pytest.StashKey[Any]()
REPORT_KEY = pytest.StashKey[Any]()
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


_leave_hypothesis_unrewritten()
_register_profiles()


def pytest_addoption(parser: pytest.Parser) -> None:
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
        choices=[c.value for c in Contract],
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


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if config.getoption("--list-checks"):
        from conformance import checks  # noqa: F401 -- registers the checks
        from conformance.report import print_checks

        print_checks()
        return 0
    if _targets_kit(config):
        from conformance import options

        options.validate(config)
    return None


def _targets_kit(config: pytest.Config) -> bool:
    """Does this run collect the conformance suite?"""
    if config.getoption("--impl") or config.getoption("--check"):
        return True
    for arg in config.args:
        target = arg.split("::")[0]
        if config.getoption("pyargs", False) and target.split(".")[0] == "conformance":
            return True
        path = Path(config.invocation_params.dir, target).resolve()
        if path == PACKAGE_DIR or PACKAGE_DIR in path.parents:
            return True
    return False


def _read_xfail_file(path: str, known: dict[str, Any]) -> dict[str, str]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise pytest.UsageError(f"--xfail-file {path}: cannot read it ({exc.strerror})") from None
    expected: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        check_id, _, reason = line.partition(" ")
        if check_id not in known:
            raise pytest.UsageError(
                f"--xfail-file {path}, line {number}: no check has the ID {check_id!r} "
                f"(pytest --list-checks prints them)"
            )
        expected[check_id] = reason.strip() or "listed in the xfail file"
    return expected


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not _targets_kit(config):
        return
    from conformance import checks  # noqa: F401 -- registers the checks
    from conformance.calls import Runner
    from conformance.kit import Kit
    from conformance.registry import CHECKS
    from conformance.report import Report

    if config.getoption("--case") and len(config.getoption("--check")) != 1:
        raise pytest.UsageError("--case replays one example of one check: give exactly one --check ID")
    unknown = [c for c in config.getoption("--check") if c not in CHECKS]
    if unknown:
        raise pytest.UsageError(f"--check {unknown[0]}: no such check (pytest --list-checks prints them)")
    if config.getoption("--xfail-file"):
        config.stash[XFAIL_KEY] = _read_xfail_file(config.getoption("--xfail-file"), CHECKS)
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
        devices.ensure_host_devices(count, local=distributed)
    except devices.DeviceSetupError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None
    spec = loader.choose_spec(config.getoption("--impl"))
    try:
        impl = loader.load_impl(spec)
    except loader.ImplSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    contract = Contract(config.getoption("--contract"))
    from hypothesis import settings

    profile = settings.get_current_profile_name()
    timeout = config.getoption("--call-timeout")
    cluster = None
    if distributed:
        from conformance.distributed import Cluster

        # Wait for the slowest process: its own call may take up to a timeout.
        cluster = Cluster.current(timeout=2 * timeout + 30)
    config.stash[KIT_KEY] = Kit(
        impl=impl,
        spec=spec,
        contract=contract,
        devices=count,
        runner=Runner(timeout=timeout),
        profile=profile,
        replay=config.getoption("--case"),
        cluster=cluster,
    )
    seed = config.getoption("hypothesis_seed", None)
    config.stash[REPORT_KEY] = Report(
        spec=spec,
        impl_version=loader.module_version(impl),
        contract=contract.value,
        profile=profile,
        seed=str(seed) if seed is not None else ("derandomized" if profile == "ci" or distributed else None),
        devices=len(devices.jax.devices()),
    )  # in a cluster: every process's devices
    config.stash[REPORT_KEY].duration = -time.perf_counter()
    if getattr(config.option, "dist", "no") == "load" and not hasattr(config, "workerinput"):
        config.option.dist = "loadgroup"  # before the workers start: they get this mode too
    # JAX, XLA's bindings and the implementation make a large heap that lives
    # as long as the run: keep it out of every later garbage collection.
    gc.collect()
    gc.freeze()


def _check_id(item: Any) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("check_id") if callspec is not None else None


# Under pytest-xdist, checks that share most of their inputs (pool.py) run in
# one worker, in two groups of about equal cost; xdist's default "load" mode
# becomes "loadgroup", which is "load" for everything without a group.
_XDIST_FIRST_GROUP = frozenset(
    {
        "call.smoke",
        "api.mesh-keyword",
        "result.type",
        "dtype.preserved",
        "values.float32",
        "values.all-dtypes",
        "layout.default-device",
        "layout.shards",
        "hygiene.global-state",  # these two call again on inputs earlier checks ran:
        "compile.once",  # the first group's are as good, and it has the lighter load
    }
)


def _group_for_xdist(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In each worker: mark the checks with their group (the controller chose the mode)."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    for item in items:
        check_id = _check_id(item)
        if check_id is not None:
            group = "conformance-1" if check_id in _XDIST_FIRST_GROUP else "conformance-2"
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if KIT_KEY not in config.stash:
        return
    _group_for_xdist(config, items)
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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect each check's verdict; runs in the xdist controller for workers' tests too."""
    from conformance.report import CheckResult, status_of

    props: dict[str, Any] = dict(report.user_properties)
    record: dict[str, Any] | None = props.get("conformance")
    if record is None or not (report.when == "call" or (report.when == "setup" and report.skipped)):
        return
    config = _CONFIG.get("config")
    if config is None or REPORT_KEY not in config.stash:
        return
    skip_reason = str(report.longrepr[2]) if report.skipped and isinstance(report.longrepr, tuple) else ""
    status = status_of(report.outcome, skip_reason, hasattr(report, "wasxfail"))
    message = record.pop("message", "") or skip_reason.removeprefix("Skipped: ")
    config.stash[REPORT_KEY].add(CheckResult(**record, status=status, message=message))


_CONFIG: dict[str, pytest.Config] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


def record_of(kit: Any, check_id: str) -> dict[str, Any]:
    """The kit's record of a check, as the plain dict a test report can carry."""
    from conformance.kit import CheckRecord

    record = kit.records.get(check_id, CheckRecord())
    data = dataclasses.asdict(record)
    data.pop("inconclusive", None)
    return {"id": check_id, **data}


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    report = config.stash.get(REPORT_KEY, None)
    if report is None or hasattr(config, "workerinput") or not report.results:
        return
    kit = config.stash[KIT_KEY]
    if kit.cluster is not None and kit.cluster.process_id != 0:
        return  # process 0 speaks for the cluster
    from conformance import report as reporting

    report.duration += time.perf_counter()
    terminalreporter.section("pjit_double conformance")
    terminalreporter.write(reporting.markdown(report))
    terminalreporter.write_line("timing: " + reporting.timing_summary(report))
    path = config.getoption("--conformance-report")
    if path:
        for written in reporting.write(report, path):
            terminalreporter.write_line(f"report written to {written}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _CONFIG["exitstatus"] = exitstatus  # type: ignore[assignment]
    if KIT_KEY in session.config.stash:
        # pytest's unraisable-exception plug-in collects five times at exit,
        # ~0.3 s each over this heap; what the checks made is done with.
        gc.collect()
        gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    kit = config.stash.get(KIT_KEY, None)
    if kit is not None and kit.runner.hung:
        # A hung call still runs on the worker thread and may hold JAX's
        # runtime; interpreter shutdown could wait on it forever.  Everything
        # is reported by now, so leave at once with pytest's verdict.
        sys.stdout.flush()
        sys.stderr.flush()
        status = _CONFIG.get("exitstatus", 1)
        os._exit(int(status) if isinstance(status, int) else 1)
