"""Setting a run up: the devices, ``--impl``, the Kit and the Report, in the right process.

A supervised run's controller (``configure_controller``) probes ``--impl`` in a child and starts
the watchdog; the process that runs the checks (a supervised worker, or the whole run with
``-n 0`` or ``--distributed``) makes the devices, loads ``--impl`` and builds the Kit
(``configure_checks``).  A user's own run (not the suite) only gets its forced host devices.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from conformance._src import internals
from conformance._src.calling import devices, loader
from conformance._src.session import scope
from conformance._src.session.options import declared_contract, host_device_count, judged_contract, run_part
from conformance._src.session.state import (
    KIT_KEY,
    PROBE_KEY,
    REPORT_KEY,
    SCHEDULE_SEED,
    SCHEDULE_SEED_KEY,
    SUPERVISOR_KEY,
    XFAIL_KEY,
)


def register_profiles() -> None:
    """Hypothesis's own --hypothesis-profile must find the kit's profile names;
    the kit's settings for them live in explore.PROFILES.  A project's own profile
    of the same name is left alone.  Without Hypothesis there is nothing to register:
    ``options.validate`` then stops the run with a usage error naming it."""
    try:
        from hypothesis import settings
    except ImportError:
        return

    for name in ("ci", "thorough"):
        try:
            settings.get_profile(name)
        except Exception:  # noqa: BLE001 -- InvalidArgument: not registered yet
            settings.register_profile(name, deadline=None)


def configure_host_devices(config: pytest.Config) -> None:
    """The user's own run: make the forced CPU devices before any test module imports JAX's arrays."""
    count = host_device_count(config)
    if count is None:
        return
    try:
        devices.ensure_host_devices(count, option="--host-devices")
    except devices.DeviceSetupError as exc:
        raise pytest.UsageError(f"--host-devices {count}: {exc}") from None


def host_devices(config: pytest.Config) -> list[Any]:
    """The devices of this run: N forced CPU devices with ``--host-devices N`` (or the
    ``host_devices`` ini value), else whatever JAX has.  Made before any test module was
    imported; a backend already started with another count is a usage error, not fewer devices.
    One device that nobody asked for fails the test that asks for them: a test of sharding on one
    device passes whatever the layout (``--host-devices 1`` asks for one on purpose)."""
    import jax

    found = list(jax.devices())
    if len(found) < 2 and host_device_count(config) is None:
        from conformance._src.library.strategies import one_device_only

        pytest.fail(one_device_only("the host_devices fixture"), pytrace=False)
    return found


def configure(config: pytest.Config) -> None:
    """A run of the suite: check what options alone cannot, then set up this process's part."""
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CHECKS
    from conformance._src.running import declared_checks as _declared  # noqa: F401 -- and the declared ones
    from conformance._src.running import platform_checks as _platform  # noqa: F401 -- an accelerator run's
    from conformance._src.session.options import read_xfail_file  # checked there first, before anything runs

    if config.getoption("--case") and len(config.getoption("--check")) != 1:
        raise pytest.UsageError("--case replays one example of one check: give exactly one --check ID")
    unknown = [c for c in config.getoption("--check") if c not in CHECKS]
    if unknown:
        raise pytest.UsageError(f"--check {unknown[0]}: no such check (pytest --list-checks prints them)")
    if config.getoption("--xfail-file"):
        config.stash[XFAIL_KEY] = read_xfail_file(config.getoption("--xfail-file"), CHECKS)
    if config.getoption("--impl") is not None and not scope.collects_suite(config):
        raise pytest.UsageError(
            "--impl: this run does not collect the conformance suite; select it with "
            "`python -m pytest --pyargs conformance --impl ...` (or give the path of the installed "
            "conformance package)"
        )
    _keep_hypothesis_out_of_the_working_directory()
    _keep_pytest_cache_out_of_the_users_folder(config)
    request = loader.requested(config.getoption("--impl"))
    if scope.supervised(config) and not hasattr(config, "workerinput"):
        _configure_controller(config, request)
    else:
        _configure_checks(config, request)
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
    if root == scope.PACKAGE_DIR.parent or scope.PACKAGE_DIR.parent in root.parents:
        return  # the kit's own checkout: its .pytest_cache is ignored by git
    internals.move_pytest_cache(config, os.path.join(_cache_root(), "pytest"))


def schedule_seed(config: pytest.Config) -> int:
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

    from conformance._src.contract.catalogue import ids_for
    from conformance._src.report import Report

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
        expected=ids_for(declared_contract(config), run_part(config)),
        xfails=dict(xfails),
        schedule_seed=schedule_seed(config),
    )
    report.duration = -time.perf_counter()
    config.stash[REPORT_KEY] = report
    return report


def _configure_controller(config: pytest.Config, request: loader.ImplRequest) -> None:
    """The watching process: probe --impl in a child, start the watchdog; the workers run the checks."""
    from conformance._src.calling.supervise import Supervisor

    timeout = config.getoption("--call-timeout")
    probe = config.stash.get(PROBE_KEY, None) or start_probe(config, request)
    found = probe.result(timeout=max(60.0, timeout))
    report = _new_report(config, request.spec, found.impl_version, found.devices)
    report.backend, report.device_kind, report.supervised = found.backend, found.device_kind, True
    supervisor = Supervisor(timeout=timeout, show_progress=not sys.stdout.isatty())
    supervisor.start()
    config.stash[SUPERVISOR_KEY] = supervisor


def _configure_checks(config: pytest.Config, request: loader.ImplRequest) -> None:
    """The process that runs the checks: a supervised worker, or the whole run with -n 0 / --distributed."""
    from conformance._src.calling import supervise
    from conformance._src.calling.calls import Runner
    from conformance._src.running.kit import Kit

    count = config.getoption("--devices")
    distributed = config.getoption("--distributed")
    if distributed:
        from conformance._src.calling.distributed import initialize

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
        found = devices.ensure_host_devices(count, local=distributed, cpu=config.getoption("--chip-part"))
    except devices.DeviceSetupError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None
    try:
        impl = loader.load_impl(request.spec, request.origin)
    except loader.ImplSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    timeout = config.getoption("--call-timeout")
    workerinput = getattr(config, "workerinput", None)
    call_log = supervise.call_log_for(workerinput)
    cluster = None
    if distributed:
        from conformance._src.calling.distributed import Cluster

        # Wait for the slowest process: its own call may take up to a timeout.
        cluster = Cluster.current(timeout=2 * timeout + 30)

    # Watched by a supervisor, the watchdog ends a call at the timeout (GIL
    # held or not); the runner's own limit is only a fallback behind it.
    runner = Runner(timeout=timeout if call_log is None else 2 * timeout + 30)
    profile = internals.hypothesis_profile_name() or "unknown"
    from conformance._src.inputs.schedule import Schedule

    contract = judged_contract(config)
    kit = Kit(
        impl=impl,
        spec=request.spec,
        contract=contract,
        contract_spec=config.getoption("--contract"),
        devices=count,
        runner=runner,
        user_timeout=timeout,
        profile=profile,
        replay=config.getoption("--case"),
        cluster=cluster,
        crashed_gates=supervise.crashed_gates(workerinput),
        schedule=Schedule(schedule_seed(config), contract),
        selected=frozenset(config.getoption("--check")) or None,
        part=run_part(config),
    )
    config.stash[KIT_KEY] = kit
    if cluster is None and kit.part != "chip":  # one process may hold the chips
        kit.start_fresh_processes()  # they run beside the checks before state.first-call
    if call_log is None and cluster is not None:
        from conformance._src.calling.distributed import state_dir

        folder = state_dir()  # conformance.launch watches this process: it reads the call log
        if folder is not None:
            call_log = supervise.CallLog(folder / f"process-{cluster.process_id}.json")
    if call_log is not None:
        call_log.catch_fatal_errors()
        kit.runner.call_log, kit.runner.watch_timeout = call_log, timeout
    if workerinput is None:
        import jax

        report = _new_report(config, request.spec, loader.module_version(impl), len(jax.devices()))
        report.backend, report.device_kind = found[0].platform, found[0].device_kind
        report.process_count = jax.process_count()  # in a cluster: every process's devices above
        report.process_index = jax.process_index()


def start_probe(config: pytest.Config, request: loader.ImplRequest) -> Any:
    """The probe child for --impl: loaded, called on one device, in a process of its own."""
    from conformance._src.calling.supervise import Probe

    return Probe.start(request.spec, config.getoption("--devices"), request.origin)
