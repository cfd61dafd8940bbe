"""The hooks that run around or beside pytest-xdist's own, for supervision (supervise.py says why).

Before pytest-xdist reads ``-n``, a run of the suite gets one worker to watch; the controller
probes ``--impl`` in a child while it starts up; a worker that died gives its check a verdict.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from conformance._src.calling import loader
from conformance._src.session import scope
from conformance._src.session.setup import schedule_seed, start_probe
from conformance._src.session.state import CONFIG, PROBE_KEY, SCHEDULE_SEED, SUPERVISOR_KEY, VERDICT_PROPERTY


def leave_usage_summary(config: pytest.Config, error: pytest.UsageError) -> None:
    """A run of the suite that stops at a usage error leaves its one line at a ``.md`` report path."""
    path = config.getoption("--conformance-report")
    if path and scope.targets_kit(config):
        from conformance._src.report import write_usage_error

        write_usage_error(str(error), path)


def _start_chips_part(config: pytest.Config) -> None:
    """``JAX_PLATFORMS`` names an accelerator: an accelerator run (calling/chips.py).  This run's
    processes judge forced CPU devices; the chips' part starts now, beside them."""
    import os

    from conformance._src.calling import chips as chip

    platform = chip.accelerator()
    if (
        platform is None
        or chip.folder() is not None
        or config.getoption("--chip-part") is not None
        or config.getoption("--distributed")
        or config.getoption("--list-checks")
        or config.getoption("collectonly", False)
        or config.getoption("--case") is not None
        or (config.getoption("--check") and "platform.chips" not in config.getoption("--check"))
    ):
        return
    found = chip.probe(platform)
    if "error" in found:
        raise pytest.UsageError(f"conformance: {found['error']}")
    args = [
        "--contract",
        config.getoption("--contract"),
        "--call-timeout",
        str(config.getoption("--call-timeout")),
    ]
    if config.getoption("--impl") is not None:
        args += ["--impl", config.getoption("--impl")]
    for name, option in (
        ("hypothesis_profile", "--hypothesis-profile"),
        ("hypothesis_seed", "--hypothesis-seed"),
    ):
        value = config.getoption(name, None)
        if value is not None:
            args += [option, str(value)]
    for check_id in config.getoption("--check"):
        if check_id != "platform.chips":
            args += ["--check", check_id]
    where = chip.start(platform, int(found["count"]), args, str(config.invocation_params.dir))
    os.environ.update({"JAX_PLATFORMS": "cpu", chip.FOLDER_ENV: str(where), chip.ACCELERATOR_ENV: platform})


class SupervisionHooks:
    """Hooks that must run around or beside pytest-xdist's own (supervise.py says why)."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> Generator[None, Any, Any]:
        if scope.targets_kit(config) and not config.getoption("--list-checks"):
            from conformance._src.session import options

            try:
                options.validate(config)  # every option, before anything runs
            except pytest.UsageError as error:
                leave_usage_summary(config, error)
                raise
        if scope.targets_kit(config) and not hasattr(config, "workerinput"):
            _start_chips_part(config)
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
            and scope.targets_kit(config)
        ):
            config.option.numprocesses = 1
        if scope.targets_kit(config) and scope.supervised_after_xdist(config):
            # Load --impl in a child while this process starts up (it never loads it itself).
            request = loader.requested(config.getoption("--impl"))
            config.stash[PROBE_KEY] = start_probe(config, request)
        if (
            hasattr(config.option, "maxworkerrestart")
            and config.option.maxworkerrestart is None
            and scope.targets_kit(config)
        ):
            from conformance._src.contract import checks  # noqa: F401 -- registers the checks
            from conformance._src.contract.catalogue import CHECKS
            from conformance._src.running import declared_checks as _declared  # noqa: F401 -- and the declared ones
            from conformance._src.running import platform_checks as _platform  # noqa: F401 -- an accelerator run's

            # Every check may crash its worker once, and all of them still get a verdict.
            config.option.maxworkerrestart = str(2 * len(CHECKS))
        try:
            return (yield)
        except pytest.UsageError as error:
            leave_usage_summary(config, error)
            raise
        finally:
            probe = config.stash.get(PROBE_KEY, None)
            if probe is not None:
                probe.cancel()  # a no-op once its result was read

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        supervisor = node.config.stash.get(SUPERVISOR_KEY, None)
        if supervisor is not None:
            from conformance._src.calling.supervise import STATE_DIR_KEY

            node.workerinput[STATE_DIR_KEY] = str(supervisor.state_dir)
        node.workerinput[SCHEDULE_SEED] = schedule_seed(node.config)

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
        config = CONFIG.get("config")
        supervisor = config.stash.get(SUPERVISOR_KEY, None) if config is not None else None
        if supervisor is None or "test_check[" not in crashitem:
            return
        from conformance._src.contract.catalogue import CHECKS

        verdict = supervisor.crash_verdict(crashitem, report.node)  # type: ignore[attr-defined]
        report.longrepr = verdict.message
        report.user_properties.append((VERDICT_PROPERTY, verdict.to_dict()))
        if verdict.id in CHECKS and CHECKS[verdict.id].gate:
            supervisor.remember_crashed_gate(verdict)
