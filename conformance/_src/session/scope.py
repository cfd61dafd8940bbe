"""Which runs the kit takes part in: the suite's own, or a user's own tests (host devices only).

The plug-in is installed into every pytest run of an environment; it stays dormant unless the
run targets the conformance suite, so installing the kit changes nothing in a project's other
test runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2]  # the conformance package


def targets_kit(config: pytest.Config) -> bool:
    """Does this run collect the conformance suite (or ask for it with --impl or --check)?"""
    if config.getoption("--impl") is not None or config.getoption("--check"):
        return True
    return collects_suite(config)


def collects_suite(config: pytest.Config) -> bool:
    """Do this run's arguments include the conformance suite?"""
    for arg in config.args:
        target = arg.split("::")[0]
        if config.getoption("pyargs", False) and target.split(".")[0] == "conformance":
            return True
        path = Path(config.invocation_params.dir, target).resolve()
        if path == PACKAGE_DIR or PACKAGE_DIR in path.parents or path in PACKAGE_DIR.parents:
            return True
    return False


def supervised_after_xdist(config: pytest.Config) -> bool:
    """Will pytest-xdist (whose own pytest_cmdline_main has not run yet) start workers?"""
    if hasattr(config, "workerinput") or not hasattr(config.option, "numprocesses"):
        return False
    if config.getoption("--list-checks") or config.getoption("collectonly", False):
        return False
    n = config.option.numprocesses
    return bool(n) or bool(getattr(config.option, "tx", None)) or getattr(config.option, "dist", "no") != "no"


def supervised(config: pytest.Config) -> bool:
    """Will the checks run in pytest-xdist workers that this process watches?"""
    return bool(getattr(config.option, "tx", None)) and getattr(config.option, "dist", "no") != "no"
