"""Forced host devices: the count the kit asks for is the count it gets, or a usage error.

JAX's backend starts once per process, so most of these run real child
processes (started in the background by conftest.py).  This test process
itself runs with the 8 devices conftest.py made.
"""

from __future__ import annotations

import json
import re
import sys

import jax
import pytest

from conformance._src.calling import devices
from conformance._src.calling.devices import DeviceSetupError, backend_started, ensure_host_devices

PYTEST = [sys.executable, "-m", "pytest", "conformance", "-q"]
# The runs that end in a usage error skip the third-party plug-ins installed here (benchmark,
# xdist, ...) to start faster; the kit's plug-in comes from the root conftest.py either way, and
# the --devices 4 run keeps them all.
NO_AUTOLOAD = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

# A plug-in that reports, after the run, how many devices the run's process had.
DEVICE_PROBE_PLUGIN = """
import jax

def pytest_terminal_summary(terminalreporter):
    devices = jax.devices()
    terminalreporter.write_line(f"KIT-PROBE devices={len(devices)} platform={devices[0].platform}")
"""

# A plug-in that starts JAX's backend as soon as pytest imports it (before the kit can).
STARTS_JAX_PLUGIN = "import jax\n\nSTARTED_WITH = len(jax.devices())\n"

# A fresh process: nothing in the kit starts the backend early, then the kit makes N devices.
DEVICE_SCRIPT = """
import json, os, sys

from conformance._src.calling import devices
from conformance import strategies as cst  # noqa: F401
from conformance._src.contract import oracle
from conformance._src.inputs import case
import conformance.plugin  # noqa: F401

cst.cases(contract="full", any_placement=True)
cst.meshes(min_size=2)
started_early = devices.backend_started()
made = devices.ensure_host_devices(int(sys.argv[1]))
import jax

print(json.dumps({"started_early": started_early, "started_after": devices.backend_started(),
                  "made": len(made), "visible": len(jax.devices()), "platform": made[0].platform,
                  "ids": sorted(d.id for d in made), "xla_flags": os.environ.get("XLA_FLAGS")}))
"""

USER_XLA_FLAGS = "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=2"


# ---------------------------------------------------------------------------
# In this process: the backend already runs with 8 devices


def test_this_process_has_the_eight_devices_of_conftest() -> None:
    assert backend_started()
    assert devices.DEFAULT_DEVICES == 8
    made = ensure_host_devices(8)  # the same count again is fine: nothing to change
    assert len(made) == 8 == len(jax.devices())
    assert [d.id for d in made] == [d.id for d in jax.devices()]
    assert {d.platform for d in made} == {"cpu"}


@pytest.mark.parametrize("count", [1, 4, 9])
def test_another_count_once_the_backend_runs_says_what_happened_and_what_to_do(count: int) -> None:
    with pytest.raises(DeviceSetupError) as error:
        ensure_host_devices(count)
    message = str(error.value)
    assert f"the kit needs {count} devices" in message  # what was asked
    assert "already running with 8 (cpu)" in message  # what happened
    assert "conftest or plug-in that calls jax.devices()" in message  # the usual cause
    assert "--devices 8" in message  # what to do, either way
    assert f"XLA_FLAGS=--xla_force_host_platform_device_count={count}" in message
    assert "\n" not in message
    assert len(jax.devices()) == 8  # and nothing changed


@pytest.mark.parametrize("count", [0, -1, -8])
def test_a_count_below_one_is_rejected(count: int) -> None:
    with pytest.raises(DeviceSetupError, match=rf"^--devices must be at least 1, got {count}$"):
        ensure_host_devices(count)


# ---------------------------------------------------------------------------
# Child processes


@pytest.mark.background(
    "devices-4",
    [*PYTEST, "--devices", "4", "--check", "call.smoke", "-n", "0", "-p", "kit_device_probe"],
    files={"kit_device_probe.py": DEVICE_PROBE_PLUGIN},
)
def test_devices_4_runs_the_kit_on_exactly_4_devices(bg_run) -> None:
    assert bg_run.returncode == 2, bg_run  # PARTIAL: one --check of the contract, and it passed
    assert re.search(r"\b1 passed\b", bg_run.stdout), bg_run
    assert not re.search(r"\b\d+ (failed|errors?)\b", bg_run.stdout), bg_run
    # The header's count is what jax.devices() gave where the implementation was loaded.
    assert "profile `default`, 4 devices" in bg_run.stdout, bg_run
    assert "| `call.smoke` | passed |" in bg_run.stdout, bg_run
    # With -n 0 the kit runs in this process, where the probe plug-in sees the kit's devices.
    assert "KIT-PROBE devices=4 platform=cpu" in bg_run.stdout, bg_run


@pytest.mark.background(
    "devices-script",
    [sys.executable, "-m", "kit_device_script", "8"],
    env={"XLA_FLAGS": USER_XLA_FLAGS},
    files={"kit_device_script.py": DEVICE_SCRIPT},
)
def test_the_users_xla_flags_are_kept_and_the_kit_count_wins(bg_run) -> None:
    assert bg_run.returncode == 0, bg_run
    assert "Traceback" not in bg_run.output, bg_run
    seen = json.loads(bg_run.stdout.strip().splitlines()[-1])
    # importing the kit and building strategies left the backend alone ...
    assert seen["started_early"] is False
    # ... so the kit made its 8 host devices, although XLA_FLAGS asks for 2 ...
    assert seen["started_after"] is True
    assert (seen["made"], seen["visible"], seen["platform"]) == (8, 8, "cpu")
    assert seen["ids"] == list(range(8))
    # ... and the user's flags are exactly as they were.
    assert seen["xla_flags"] == USER_XLA_FLAGS


@pytest.mark.background(
    "devices-started-early",
    [*PYTEST, "-p", "kit_starts_jax"],
    env=NO_AUTOLOAD,
    files={"kit_starts_jax.py": STARTS_JAX_PLUGIN},
)
def test_a_plugin_that_starts_jax_first_is_a_usage_error_naming_the_count(bg_run) -> None:
    assert bg_run.returncode == 4, bg_run  # pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in bg_run.output, bg_run
    errors = [line for line in bg_run.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1, bg_run
    assert "the kit needs 8 devices" in errors[0], bg_run
    assert "already running with 1 (cpu)" in errors[0], bg_run
    assert "--devices 1" in errors[0], bg_run
    assert not re.search(r"\b\d+ passed\b", bg_run.stdout), bg_run  # no check ran on 1 device


@pytest.mark.background(
    "devices-advice",
    [*PYTEST, "--check", "call.smoke", "-p", "kit_starts_jax"],
    env={"XLA_FLAGS": "--xla_force_host_platform_device_count=8", **NO_AUTOLOAD},
    files={"kit_starts_jax.py": STARTS_JAX_PLUGIN},
)
def test_the_advised_xla_flags_let_that_run_go_ahead(bg_run) -> None:
    # The message above says to set XLA_FLAGS=--xla_force_host_platform_device_count=8: it works.
    assert bg_run.returncode == 2, bg_run  # PARTIAL: one --check of the contract, and it passed
    assert re.search(r"\b1 passed\b", bg_run.stdout), bg_run


@pytest.mark.background("devices-0", [*PYTEST, "--devices", "0"], env=NO_AUTOLOAD)
def test_devices_0_is_a_usage_error(bg_run) -> None:
    assert bg_run.returncode == 4, bg_run
    assert "Traceback" not in bg_run.output, bg_run
    errors = [line for line in bg_run.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1, bg_run
    assert "--devices must be at least 1, got 0" in errors[0], bg_run


@pytest.mark.parametrize(
    ("platforms", "error", "expected"),
    [
        (
            "cuda",
            AssertionError(),
            "JAX's backend could not start for JAX_PLATFORMS=cuda: AssertionError (no device of that "
            "platform was found); unset JAX_PLATFORMS to test on forced CPU devices",
        ),
        (
            "tpu",
            RuntimeError("Unable to initialize backend 'tpu': no TPU\nmore detail"),
            "JAX's backend could not start for JAX_PLATFORMS=tpu: Unable to initialize backend 'tpu': "
            "no TPU; unset JAX_PLATFORMS to test on forced CPU devices",
        ),
    ],
)
def test_a_backend_that_cannot_start_is_one_line_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, platforms: str, error: Exception, expected: str
) -> None:
    from conformance._src.calling.devices import backend_failure

    monkeypatch.setenv("JAX_PLATFORMS", platforms)
    assert backend_failure(error) == expected


# ---------------------------------------------------------------------------
# Too few devices: the run says what it left out, and exit 0 never claims it judged it

CACHED_ON_SHAPE = ["--impl", "tests/mutants/cache_by_mesh_shape.py:pjit_double"]


@pytest.mark.background(
    "devices-1-shape-cache",
    [
        *PYTEST,
        "-p",
        "no:cacheprovider",
        *CACHED_ON_SHAPE,
        "--devices",
        "1",
        "--conformance-report",
        "{tmp}/d1.json",
    ],
)
def test_one_device_is_partial_never_conforming_and_its_header_says_why(bg_run, background) -> None:
    # The mutant reuses a same-shaped mesh's jit: one device cannot show it, so no verdict may say
    # CONFORMING: the run is PARTIAL (exit 2), and the header names what was left out and why.
    assert bg_run.returncode == 2, bg_run
    header = [line for line in bg_run.stdout.splitlines() if line.startswith("**pjit_double conformance:")]
    assert header and "PARTIAL: the whole contract was not judged" in header[0], bg_run
    assert "need more devices than the 1 there are" in header[0], bg_run
    assert "a forced-CPU run with --devices 8 judges them" in header[0], bg_run
    assert "Every cell of every check's domain was visited" not in bg_run.stdout, bg_run
    report = json.loads((background.tmp / "d1.json").read_text())
    assert report["verdict"]["status"] == "partial" and report["verdict"]["conforming"] is False
    left = report["verdict"]["left_out"]
    assert left["divisibility.no-false-error"] == ["needs 4 devices, 1 available (--devices)"], left
    assert any(
        "2-D (both axes of 2+ devices) meshes (need 4 devices)" in line for line in left["layout.mesh"]
    )


@pytest.mark.background(
    "devices-8-shape-cache",
    [
        *PYTEST,
        "-p",
        "no:cacheprovider",
        *CACHED_ON_SHAPE,
        "--check",
        "layout.mesh",
        "--hypothesis-profile",
        "ci",
    ],
)
def test_eight_devices_find_the_same_implementation_broken_and_name_it(bg_run) -> None:
    assert bg_run.returncode == 1, bg_run
    assert "[layout.mesh] the result does not have the requested layout" in bg_run.stdout, bg_run


def test_device_setup_that_does_not_finish_is_named_as_such_not_blamed_on_the_implementation() -> None:
    # The real probe child, asked for 100000 forced CPU devices (minutes to make), stopped after 3 s.
    from conformance._src.calling.supervise import Probe

    probe = Probe.start("reference:pjit_double", 100_000)
    with pytest.raises(pytest.UsageError) as error:
        probe.result(timeout=3)
    message = str(error.value)
    assert message.startswith("conformance: --devices 100000: making 100000 devices did not finish"), message
    assert "device set-up, before the implementation was loaded" in message, message
    assert "--impl" not in message and "import" not in message, message
