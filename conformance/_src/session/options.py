"""Every option of the kit, checked before anything runs.

``validate`` is called by the plug-in from ``pytest_cmdline_main``, before
devices are made, the implementation is loaded or a worker starts.  Each bad
value is one ``pytest.UsageError`` line (exit status 4).

Nothing here needs devices, so it all runs before any process starts JAX's
backend; whether the backend starts at all is devices.py's question.  The
device count each check needs is not an option error: a check that needs
more devices than ``--devices`` gives is "not applicable" (catalogue.py).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from conformance._src import internals
from conformance._src.calling import devices, loader

if TYPE_CHECKING:
    from conformance._src.declared.contract import Contract

IMPL_FORMS = "MODULE:ATTR or path/to/file.py:ATTR (e.g. mypkg:pjit_double)"


def add_options(parser: pytest.Parser) -> None:
    """The kit's command-line options and ini value (``pytest --help`` lists them)."""
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
        metavar="seed|full|MODULE:ATTR",
        help="seed: pjit_double as written; full: plus mesh=, dtypes, placements (default); "
        "MODULE:ATTR or path/to/file.py:ATTR: a conformance.contracts.Contract for your own function",
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
    # The chips' part of an accelerator run (calling/chips.py starts it): the checks on the chips,
    # with N forced CPU devices beside them to compare with.  Not for users: the run starts it.
    group.addoption("--chip-part", type=int, default=None, metavar="N", help=argparse.SUPPRESS)
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


def list_checks(config: pytest.Config) -> int | None:
    """``--list-checks``: print the check IDs with their contracts; 0 ends the run there."""
    if not config.getoption("--list-checks"):
        return None
    _require_dependencies()
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.report import print_checks
    from conformance._src.running import declared_checks as _declared  # noqa: F401 -- and the declared ones
    from conformance._src.running import platform_checks as _platform  # noqa: F401 -- an accelerator run's

    print_checks()
    return 0


def validate(config: pytest.Config) -> None:
    """Raise ``pytest.UsageError`` with one line for the first bad option."""
    _require_dependencies()
    _validate_impl(config)
    _validate_numbers(config)
    _validate_profile(config)
    _validate_contract(config)
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CHECKS
    from conformance._src.running import declared_checks as _declared  # noqa: F401 -- and the declared ones
    from conformance._src.running import platform_checks as _platform  # noqa: F401 -- an accelerator run's

    unknown = [c for c in config.getoption("--check") if c not in CHECKS]
    if unknown:
        raise pytest.UsageError(f"--check {unknown[0]}: no such check (pytest --list-checks prints them)")
    other = [
        c
        for c in config.getoption("--check")
        if not CHECKS[c].part and CHECKS[c].declared != declared_contract(config)
    ]
    if other:
        kind = "a declared contract's" if CHECKS[other[0]].declared else "pjit_double's (seed, full)"
        raise pytest.UsageError(
            f"--check {other[0]}: it is one of {kind} checks, "
            f"not of --contract {config.getoption('--contract')}"
        )
    if config.getoption("--case") is not None:
        _validate_case(config)
    if config.getoption("--xfail-file"):
        read_xfail_file(config.getoption("--xfail-file"), CHECKS)
    if config.getoption("--conformance-report"):
        _validate_report_path(config.getoption("--conformance-report"))


# What the kit imports to run: one that will not import is a usage error, not a traceback.
_DEPENDENCIES = ("numpy", "ml_dtypes", "hypothesis", "jax")


def _require_dependencies() -> None:
    import importlib
    import sys

    for name in _DEPENDENCIES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise pytest.UsageError(
                f"the kit needs {name}, which {sys.executable} cannot import ({exc}): install the kit "
                f"with its dependencies into this Python (pip install -e . in a checkout)"
            ) from None


# ---------------------------------------------------------------------------
# --impl / CONFORMANCE_IMPL


def _validate_impl(config: pytest.Config) -> None:
    try:
        loader.choose_spec(config.getoption("--impl"))
    except loader.ImplSpecError as exc:
        raise pytest.UsageError(str(exc)) from None


# ---------------------------------------------------------------------------
# --contract


CONTRACT_KEY = pytest.StashKey["Contract"]()


def judged_contract(config: pytest.Config) -> Contract:
    """The contract --contract names: seed, full, or a declaration loaded from MODULE:ATTR
    (``ContractError`` where it cannot be judged by; _validate_contract makes that a usage error)."""
    found = config.stash.get(CONTRACT_KEY, None)
    if found is None:
        from conformance._src.declared.contract import load
        from conformance._src.declared.terms import NAMES, named

        value = config.getoption("--contract")
        found = named(value) if value in NAMES else load(value)
        config.stash[CONTRACT_KEY] = found
    return found


def run_part(config: pytest.Config) -> str:
    """Which part of a run this process's checks are (catalogue.Check.part): "chip" in an
    accelerator run's chips' part, "accelerator" in its forced-CPU part, else ""."""
    from conformance._src.calling import chips as chip

    if config.getoption("--chip-part") is not None:
        return "chip"
    return "accelerator" if chip.folder() is not None else ""


def declared_contract(config: pytest.Config) -> bool:
    """Whether the contract is judged by the ``fn.*`` checks: one declared with MODULE:ATTR and not
    of the one-vector form that every other check takes (as seed and full are)."""
    if config.getoption("--contract") in ("seed", "full"):
        return False
    from conformance._src.declared.contract import ContractError

    try:
        return judged_contract(config).one_vector() is not None
    except ContractError:
        return True  # _validate_contract says why, as a usage error


def _validate_contract(config: pytest.Config) -> None:
    """seed, full, or a declared contract that loads and is one the kit can judge by."""
    value = config.getoption("--contract")
    if value in ("seed", "full"):
        return
    if ":" not in value:
        raise pytest.UsageError(
            f"--contract {value}: give seed, full, or MODULE:ATTR / path/to/file.py:ATTR naming a "
            f"conformance.contracts.Contract"
        )
    from conformance._src.declared.contract import ContractError

    try:
        judged_contract(config)
    except ContractError as exc:
        raise pytest.UsageError(exc.usage_line(value)) from None


# ---------------------------------------------------------------------------
# Numbers


def _validate_numbers(config: pytest.Config) -> None:
    count = config.getoption("--devices")
    if count < 1:
        raise pytest.UsageError(f"--devices must be at least 1, got {count}")
    timeout = config.getoption("--call-timeout")
    if not (math.isfinite(timeout) and timeout > 0):
        raise pytest.UsageError(
            f"--call-timeout {timeout:g}: give a finite number of seconds above 0 (default 60)"
        )
    processes = config.getoption("--num-processes")
    if processes is not None and processes < 1:
        raise pytest.UsageError(f"--num-processes {processes}: give at least 1 process")
    process_id = config.getoption("--process-id")
    if process_id is not None and (process_id < 0 or (processes is not None and process_id >= processes)):
        top = "" if processes is None else f" and below --num-processes {processes}"
        raise pytest.UsageError(f"--process-id {process_id}: must be at least 0{top}")


# ---------------------------------------------------------------------------
# --hypothesis-profile (Hypothesis's own option; unknown names end pytest in an INTERNALERROR)


def _validate_profile(config: pytest.Config) -> None:
    name = config.getoption("--hypothesis-profile", None)
    if name is None:
        return
    from hypothesis import settings

    try:
        settings.get_profile(name)
    except Exception:  # noqa: BLE001 -- InvalidArgument: no such profile
        known = internals.hypothesis_profiles() or ["ci", "default", "thorough"]
        raise pytest.UsageError(
            f"--hypothesis-profile {name}: no such profile; known profiles: {', '.join(known)}"
        ) from None


# ---------------------------------------------------------------------------
# --case


def _validate_declared_case(config: pytest.Config, check_id: str, contract: Contract) -> None:
    """A declared contract's --case is a history of fn.histories, of this contract's arguments,
    on devices --devices gives."""
    from conformance._src.declared import history

    if check_id != "fn.histories":
        raise pytest.UsageError(
            f"--case: --check {check_id} takes no case; a declared contract replays a history of "
            f"fn.histories (--check fn.histories), other checks rerun with their --hypothesis-seed"
        )
    try:
        history.decode(contract, config.getoption("--case"), devices=config.getoption("--devices"))
    except history.TokenError as exc:
        raise pytest.UsageError(f"--case: not a valid history token of {contract.name}: {exc}") from None


def _validate_case(config: pytest.Config) -> None:
    """The token is one, of one --check that takes a case, in the contract and in the check's domain.

    All of it without devices: the check's domain is asked of the case with
    an abstract mesh of the same shape and axes, and the devices the case
    names are counted against --devices (in --distributed runs, where device
    ids are global, the kit's replay finds a missing device itself).
    """
    from conformance._src.contract.catalogue import CHECKS
    from conformance._src.inputs.case import Case, CaseTokenError, parse, parse_history

    wanted = config.getoption("--check")
    if len(wanted) != 1:
        raise pytest.UsageError("--case replays one example of one check: give exactly one --check ID")
    check = CHECKS[wanted[0]]
    contract = judged_contract(config)
    if declared_contract(config):
        _validate_declared_case(config, check.id, contract)
        return
    if not check.applies(contract):
        raise pytest.UsageError(
            f"--case: --check {check.id} is not in the {contract.name} contract, "
            f"so there is no example of it to replay (give --contract full)"
        )
    if check.domain is None and not check.history:
        raise pytest.UsageError(
            f"--case: --check {check.id} takes no case: it makes its own call; rerun it without --case"
        )
    try:
        if check.history:  # a whole history of calls (history.py): every call of it is checked
            steps = parse_history(config.getoption("--case"))
        else:
            steps = [parse(config.getoption("--case"))]
    except CaseTokenError as exc:
        kind = "history token" if check.history else "case token"
        raise pytest.UsageError(f"--case: not a valid {kind}: {exc}") from None
    for data in steps:
        _validate_call(config, data, contract)
    if check.domain is not None:
        data = steps[0]
        from jax.sharding import AbstractMesh  # no devices needed

        mesh = None if data.mesh_ids is None else AbstractMesh(data.mesh_shape, data.mesh_axes)
        stand_in = Case(data.values, cast(Any, mesh), data.mesh_arg, data.placement)
        if not check.domain.accepts(stand_in, contract):
            raise pytest.UsageError(
                f"--case: --check {check.id} never draws this case ({_describe(data)}); "
                f"replay it with the check whose failure printed it"
            )


def _validate_call(config: pytest.Config, data: Any, contract: Contract) -> None:
    """One call of a --case token: in the contract, on devices that --devices makes."""
    problem = _outside_contract(data, contract)
    if problem:
        raise pytest.UsageError(f"--case: the case is not in the {contract.name} contract: {problem}")
    count = config.getoption("--devices")
    if not config.getoption("--distributed") and data.device_ids() and max(data.device_ids()) >= count:
        raise pytest.UsageError(
            f"--case: the case uses device {max(data.device_ids())}, but --devices {count} makes "
            f"devices 0 to {count - 1}: give --devices {max(data.device_ids()) + 1} or more"
        )


def _describe(data: Any) -> str:
    from conformance._src.inputs.case import call_text, describe_placement

    mesh = (
        "default (first device only)"
        if data.mesh_ids is None
        else " x ".join(f"{a}={n}" for a, n in zip(data.mesh_axes, data.mesh_shape, strict=True))
    )
    return (
        f"length {data.n}, dtype {data.dtype}, mesh {mesh}, called with {call_text(data)}, "
        f"x {describe_placement(data.placement)}"
    )


def _outside_contract(data: Any, contract: Contract) -> str | None:
    """Why a parsed case (case.CaseData) is outside the contract's domain, if it is."""
    import jax

    from conformance._src.declared.terms import DATA_AXIS, dtypes_in_domain

    x64 = bool(jax.config.read("jax_enable_x64"))
    if data.dtype not in dtypes_in_domain(contract, x64=x64):
        if not x64 and data.dtype in dtypes_in_domain(contract, x64=True):
            return f"dtype {data.dtype} needs JAX_ENABLE_X64=1"
        return f"dtype {data.dtype} is not one of its dtypes"
    if not contract.takes_mesh:
        if data.mesh_arg != "omit":
            return "the seed contract calls pjit_double(x) without a mesh"
        if data.placement[0] != "uncommitted":
            return "the seed contract's x is an uncommitted array"
    if data.mesh_ids is not None and DATA_AXIS not in data.mesh_axes:
        return f"its mesh has no {DATA_AXIS!r} axis (axes {list(data.mesh_axes)})"
    placement = data.placement
    if placement[0] == "sharded" and placement[2] == "split" and data.n % len(placement[1]):
        return f"x cannot be split over {len(placement[1])} devices: its length is {data.n}"
    return None


# ---------------------------------------------------------------------------
# --xfail-file


def read_xfail_file(path: str, known: dict[str, Any]) -> dict[str, str]:
    """Check ID -> reason, from lines of ``CHECK-ID  reason`` (any whitespace between, ``#`` comments)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise pytest.UsageError(f"--xfail-file {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark from an editor is not part of the first ID
    except UnicodeDecodeError as exc:
        where = raw[: exc.start].count(b"\n") + 1
        raise pytest.UsageError(f"--xfail-file {path}, line {where}: not UTF-8 text") from None
    expected: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split(None, 1)
        if not fields:
            continue
        check_id = fields[0]
        if check_id not in known:
            raise pytest.UsageError(
                f"--xfail-file {path}, line {number}: no check has the ID {check_id!r} "
                f"(pytest --list-checks prints them)"
            )
        reason = fields[1].strip() if len(fields) > 1 else ""
        expected[check_id] = reason or "listed in the xfail file"
    return expected


# ---------------------------------------------------------------------------
# --conformance-report


def report_paths(path: str) -> list[Path]:
    """The files ``--conformance-report PATH`` writes: PATH, and for a .md PATH the .json beside it."""
    target = Path(path)
    return [target, target.with_suffix(".json")] if target.suffix == ".md" else [target]


def _validate_report_path(path: str) -> None:
    """Can every report file be written?  Made and removed again where it did not exist."""
    for target in report_paths(path):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir():
                raise IsADirectoryError(21, "it is a directory")
            existed = target.exists()
            with open(target, "a", encoding="utf-8"):
                pass
            if not existed:
                os.remove(target)
        except OSError as exc:
            raise pytest.UsageError(
                f"--conformance-report {path}: cannot write {target} ({exc.strerror or exc})"
            ) from None
