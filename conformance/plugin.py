"""The pytest plug-in: the kit's hooks, each handing off to the room that owns its work.

Loaded by this repository's root conftest.py and, once installed, through the ``pytest11`` entry
point of the same name (so it is never registered twice).  It stays dormant unless the run
targets the conformance suite (``_src/session/scope.py``), so installing the kit changes nothing
in a project's other test runs, except that ``--host-devices N`` and the ``host_devices`` fixture
are there for them.  Importing it starts nothing: neither JAX's backend nor Hypothesis.

Data flow: ``--impl`` -> options.validate -> (supervised: the controller probes ``--impl`` in a
child process and starts one pytest-xdist worker, supervision.py) -> setup: devices, loader, Kit
-> one test per check (test_conformance.py) -> CheckVerdict carried on the test report ->
verdicts.py: Report -> terminal table, ``--conformance-report`` files, exit status.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from conformance._src import internals
from conformance._src.session import options, scope, setup, verdicts
from conformance._src.session.state import KIT_KEY, VERDICT_PROPERTY
from conformance._src.session.supervision import SupervisionHooks

__all__ = ["VERDICT_PROPERTY"]


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    internals.leave_hypothesis_unrewritten()
    setup.register_profiles()  # before Hypothesis's own plug-in loads --hypothesis-profile
    pluginmanager.register(SupervisionHooks(), "conformance-supervision")
    options.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    return options.list_checks(config)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if scope.targets_kit(config):
        setup.configure(config)
    else:
        setup.configure_host_devices(config)


@pytest.fixture(scope="session")
def host_devices(request: pytest.FixtureRequest) -> list[Any]:
    """The devices of this run: N forced CPU devices with ``--host-devices N`` (or the
    ``host_devices`` ini value), else whatever JAX has; one device nobody asked for fails."""
    return setup.host_devices(request.config)


@pytest.fixture(scope="session")
def conformance_kit(request: pytest.FixtureRequest) -> Any:
    """The Kit that runs the checks, in a run of the suite."""
    kit = request.config.stash.get(KIT_KEY, None)
    if kit is None:
        pytest.skip("the conformance kit is not active in this run")
    return kit


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if KIT_KEY in config.stash:
        verdicts.select_and_mark(config, items)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    verdicts.session_started(session)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    verdicts.shorten_failure(item, call, report)
    return report


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    verdicts.check_started(nodeid, location)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    verdicts.collect(report)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    return verdicts.teststatus(report, config)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    verdicts.terminal_summary(terminalreporter, exitstatus, config)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Generator[None, Any, Any]:
    verdicts.set_exit_status(session)
    return (yield)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    verdicts.unconfigure(config)
