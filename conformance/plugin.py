"""The pytest plug-in: options, device set-up, ``--impl`` loading, summary.

Loaded by this repository's root conftest.py and, once installed, through
the ``pytest11`` entry point of the same name (so it is never registered
twice).  It stays dormant unless the run targets the conformance suite, so
installing the kit changes nothing in a project's other test runs.
Importing it must not start JAX's backend: devices are made in
``pytest_configure``, before any test module is collected.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from conformance import devices, loader
from conformance.contract import Contract

PACKAGE_DIR = Path(__file__).resolve().parent
KIT_KEY = pytest.StashKey["object"]()

# Hypothesis's --hypothesis-profile must find the kit's profile names; the
# kit's own settings for them live in kit.PROFILES.  A project's own profile
# of the same name is left alone.
for _name in ("ci", "thorough"):
    try:
        settings.get_profile(_name)
    except Exception:  # noqa: BLE001 -- InvalidArgument: not registered yet
        settings.register_profile(_name, deadline=None)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "pjit_double conformance kit")
    group.addoption("--impl", default=None, metavar="MODULE:ATTR",
                    help="implementation to check: MODULE:ATTR or path/to/file.py:ATTR "
                         f"(default: ${loader.ENV_VAR}, then {loader.DEFAULT_SPEC})")
    group.addoption("--contract", default="full", choices=[c.value for c in Contract],
                    help="seed: the exercise as written; full: plus mesh=, dtypes, placements (default)")
    group.addoption("--devices", type=int, default=devices.DEFAULT_DEVICES, metavar="N",
                    help=f"forced CPU devices to test on (default {devices.DEFAULT_DEVICES})")
    group.addoption("--call-timeout", type=float, default=60.0, metavar="SECONDS",
                    help="a call of the implementation that takes longer fails as hung (default 60)")
    group.addoption("--check", action="append", default=[], metavar="ID",
                    help="run only this check (repeatable)")
    group.addoption("--case", default=None, metavar="TOKEN",
                    help="replay exactly one example (printed in failure messages); needs --check")


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


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if not _targets_kit(config):
        return
    from conformance.kit import Kit  # imports jax: only for runs that use the kit

    from conformance.calls import Runner

    if config.getoption("--case") and len(config.getoption("--check")) != 1:
        raise pytest.UsageError("--case replays one example of one check: give exactly one --check ID")
    count = config.getoption("--devices")
    try:
        devices.ensure_host_devices(count)
    except devices.DeviceSetupError as exc:
        raise pytest.UsageError(f"conformance: {exc}") from None
    spec = loader.choose_spec(config.getoption("--impl"))
    try:
        impl = loader.load_impl(spec)
    except loader.ImplSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    from conformance import checks  # noqa: F401 -- registers the checks
    from conformance.registry import CHECKS

    unknown = [c for c in config.getoption("--check") if c not in CHECKS]
    if unknown:
        raise pytest.UsageError(f"--check {unknown[0]}: no such check (see the IDs in SPEC.md)")
    config.stash[KIT_KEY] = Kit(
        impl=impl, spec=spec, contract=Contract(config.getoption("--contract")), devices=count,
        runner=Runner(timeout=config.getoption("--call-timeout")),
        profile=settings.get_current_profile_name(), replay=config.getoption("--case"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = set(config.getoption("--check"))
    if not wanted:
        return
    keep = [i for i in items if getattr(i, "callspec", None) is None
            or i.callspec.params.get("check_id") in wanted or "check_id" not in i.callspec.params]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


@pytest.fixture(scope="session")
def conformance_kit(request: pytest.FixtureRequest) -> object:
    kit = request.config.stash.get(KIT_KEY, None)
    if kit is None:
        pytest.skip("the conformance kit is not active in this run")
    return kit
