"""The one door to private internals, and its self-test (conformance/internals.py).

Each probe is broken on purpose, the way a new JAX release could break it
(an event renamed, a private function moved, a primitive renamed, a
module attribute gone): in this process the self-test names it, and in a
real run of the kit every check that rests on it ends as a kit error that
names the probe and the versions -- never passed, never the
implementation's failure -- while the other checks still judge.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from conformance._src import selftest
from conformance._src.contract import jax_bugs
from tests.conftest import Background, Run

# How each probe is broken: (module, attribute, replacement or None to delete it).
BREAKS = {
    selftest.COMPILE_COUNT: ("conformance._src.internals", "BACKEND_COMPILE_EVENT", "/jax/renamed/compile"),
    # Moved: jit's impl rule now reaches the function by another way, the module attribute is gone.
    selftest.JIT_SPY: ("jax._src.pjit", "_pjit_call_impl_python", "<moved>"),
    selftest.JAXPR_JIT: ("conformance._src.library.jit_probe", "JIT_PRIMITIVES", ("renamed_jit",)),
    selftest.GLOBAL_STATE: ("jax._src.mesh", "thread_resources", None),
}
# The checks whose verdict rests on each probe (registry.Check.needs).
DEPENDENT = {
    selftest.COMPILE_COUNT: "compile.once",
    selftest.JIT_SPY: "jit.shardings",
    selftest.JAXPR_JIT: "jit.shardings",
    selftest.GLOBAL_STATE: "hygiene.global-state",
}
INDEPENDENT = "values.float32"

BREAK_PLUGIN = """
import importlib, json, os
from tests.test_kit_internals import break_internal

def pytest_configure(config):
    module, attribute, value = json.loads(os.environ["KIT_BREAK"])
    value = tuple(value) if isinstance(value, list) else value
    break_internal(importlib.import_module(module), attribute, value)
"""


def break_internal(target: Any, attribute: str, value: Any, patch: Any = None) -> None:
    """Break ``target.attribute``: delete it (None), move it ("<moved>"), or replace it."""
    setattr_, delattr_ = (patch.setattr, patch.delattr) if patch is not None else (setattr, delattr)
    if value == "<moved>":
        # As if JAX had renamed it: JAX's own callers reach it under a name of their own (a
        # private copy of the module's globals), and the module attribute the kit knows is gone.
        private = dict(vars(target))
        primitive = getattr(target, "jit_p", None) or target.pjit_p
        for name, fn in list(vars(target).items()):
            if isinstance(fn, types.FunctionType) and _mentions(fn.__code__, attribute):
                copy = types.FunctionType(fn.__code__, private, fn.__name__, fn.__defaults__, fn.__closure__)
                copy.__kwdefaults__ = fn.__kwdefaults__
                setattr_(target, name, copy)
                if primitive.impl is fn:
                    setattr_(primitive, "impl", copy)
        delattr_(target, attribute)
    elif value is None:
        delattr_(target, attribute)
    else:
        setattr_(target, attribute, value)


def _mentions(code: types.CodeType, name: str) -> bool:
    return name in code.co_names or any(
        _mentions(c, name) for c in code.co_consts if isinstance(c, types.CodeType)
    )


def _break(monkeypatch: pytest.MonkeyPatch, probe: str) -> None:
    module, attribute, value = BREAKS[probe]
    break_internal(importlib.import_module(module), attribute, value, monkeypatch)


def test_every_probe_passes_on_the_installed_versions() -> None:
    assert selftest.self_test() == {}


def test_every_probe_has_a_break_and_a_dependent_check() -> None:
    import conformance._src.contract.checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CHECKS

    assert set(BREAKS) == set(selftest.PROBES) == set(DEPENDENT)  # the cluster's: at the end
    for probe, check_id in DEPENDENT.items():
        assert probe in CHECKS[check_id].needs
    assert not CHECKS[INDEPENDENT].needs


@pytest.mark.parametrize("probe", sorted(BREAKS))
def test_a_broken_internal_fails_its_probe(monkeypatch: pytest.MonkeyPatch, probe: str) -> None:
    _break(monkeypatch, probe)
    failed = selftest.self_test()
    assert probe in failed, failed


def _kit_run(probe: str) -> tuple[list[str], dict[str, str], dict[str, str]]:
    return (
        [
            sys.executable,
            "-m",
            "pytest",
            "conformance",
            "-q",
            "--check",
            DEPENDENT[probe],
            "--check",
            INDEPENDENT,
            "--conformance-report",
            f"{{tmp}}/broken-{probe}.json",
        ],
        {"PYTEST_PLUGINS": "kit_break_internals", "KIT_BREAK": json.dumps(BREAKS[probe])},
        {"kit_break_internals.py": BREAK_PLUGIN},
    )


def _check_kit_error(run: Run, background: Background, probe: str) -> None:
    report = json.loads((Path(background.tmp) / f"broken-{probe}.json").read_text())
    checks = {c["id"]: c for c in report["checks"]}
    dependent = checks[DEPENDENT[probe]]
    assert dependent["status"] == "kit error", run
    assert f"probe {probe!r} failed" in dependent["message"], dependent["message"]
    assert f"jax {report['environment']['jax']}" in dependent["message"], dependent["message"]
    assert "says nothing about the implementation" in dependent["message"]
    assert checks[INDEPENDENT]["status"] == "passed", run  # the other checks still judge
    assert report["verdict"]["status"] == "kit error", run
    assert run.returncode == 3, run
    assert "KIT ERROR" in run.stdout, run


@pytest.mark.parametrize(
    "probe",
    [
        pytest.param(probe, marks=pytest.mark.background(f"broken-{probe}", *_kit_run(probe)), id=probe)
        for probe in sorted(BREAKS)
    ],
)
def test_a_broken_internal_makes_its_dependent_check_a_kit_error(
    probe: str, bg_run: Run, background: Background
) -> None:
    _check_kit_error(bg_run, background, probe)


def test_a_known_jax_bug_names_the_version_and_the_fix() -> None:
    import jax

    described = jax_bugs.EMPTY_SPLIT.describe()
    assert f"JAX {jax.__version__}" in described and "fixed in JAX 0.9.1" in described
    assert jax_bugs.EMPTY_SPLIT.present() is (jax_bugs.jax_version() < (0, 9, 1))
    assert jax_bugs.EMPTY_SPLIT.raised(AssertionError("Unexpected XLA sharding override: ..."))
    assert not jax_bugs.EMPTY_SPLIT.raised(ValueError("Unexpected XLA sharding override"))


def test_the_memory_kind_bug_is_what_jax_itself_does_here() -> None:
    """The kit excuses a pinned_host input split onto several devices only where JAX itself,
    with nothing of the kit in the way, cannot move it (JAX 0.12.1 on CPU; not 0.10.2)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    from conformance._src.calling.devices import other_memory_kinds
    from conformance._src.inputs.case import Case

    devices = jax.local_devices()
    mesh = Mesh(np.array(devices[:4]), ("data",))
    for kind in other_memory_kinds():
        x = jax.device_put(np.arange(8, dtype=np.float32), SingleDeviceSharding(devices[1], memory_kind=kind))
        try:
            jax.device_put(x, NamedSharding(mesh, PartitionSpec("data"))).block_until_ready()
            jax_cannot = False
        except Exception as error:  # noqa: BLE001 -- what JAX itself does is the measurement
            jax_cannot = jax_bugs.ONE_DEVICE_MEMORY_SPREAD.raised(error)
        case = Case(
            values=np.arange(8, dtype=np.float32), mesh=mesh, mesh_arg="mesh", placement=("memory", kind, 1)
        )
        assert (jax_bugs.hitting(case) is jax_bugs.ONE_DEVICE_MEMORY_SPREAD) is jax_cannot, kind
        on_target = Case(values=case.values, mesh=mesh, mesh_arg="mesh", placement=("memory", kind, "target"))
        assert jax_bugs.hitting(on_target) is None, kind


CLUSTER_BREAK_PLUGIN = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    from jax._src import distributed

    distributed.global_state.client = None  # as if JAX kept its key-value client elsewhere
"""


def test_the_cluster_client_moved_makes_every_check_of_a_distributed_run_a_kit_error(tmp_path: Path) -> None:
    from tests.test_kit_distributed import launch

    (tmp_path / "kit_break_cluster.py").write_text(CLUSTER_BREAK_PLUGIN)
    report = tmp_path / "report.json"
    done, _ = launch(
        "--check",
        INDEPENDENT,
        "--conformance-report",
        str(report),
        env={"PYTEST_PLUGINS": "kit_break_cluster", "PYTHONPATH": str(tmp_path)},
    )
    found = json.loads(report.read_text())
    checks = {c["id"]: c for c in found["checks"]}
    assert checks[INDEPENDENT]["status"] == "kit error", done.stdout[-4000:]
    assert f"probe {selftest.CLUSTER_CLIENT!r} failed" in checks[INDEPENDENT]["message"]
    assert found["verdict"]["status"] == "kit error"
    assert "-> exit status 3" in done.stdout, done.stdout[-4000:]
