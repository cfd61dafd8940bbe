"""Installed use, as in another project's CI: wheel -> fresh venv -> pytest --pyargs conformance.

The venv is a plain one (no ``--system-site-packages``): it gets the kit
itself from the wheel built here, without an index, and a ``.pth`` file puts
the site-packages of the interpreter running these tests after its own, for
jax, pytest and hypothesis -- whether that interpreter is a system install
or itself a venv (whose packages ``--system-site-packages`` would not see).
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.kit_process import ROOT, run_kit, run_kit_report, statuses, verdict

GOOD = '''
"""A third-party implementation: one jitted function per mesh."""
__version__ = "1.2.3"
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

_cache = {}

def pjit_double(x, *, mesh=None):
    if mesh not in _cache:
        m = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
        s = NamedSharding(m, PartitionSpec("data"))
        _cache[mesh] = (jax.jit(lambda v: 2 * v, in_shardings=s, out_shardings=s), s, m.shape["data"])
    fn, s, size = _cache[mesh]
    if x.shape[0] % size:
        raise ValueError(f"length {x.shape[0]} is not divisible by {size}")
    if isinstance(x, jax.Array) and x.committed and not x.sharding.is_equivalent_to(s, 1):
        x = jax.device_put(x, s)
    return fn(x)
'''

# Right values, but the default mesh is built on the last device.
BAD = GOOD.replace("jax.devices()[:1]", "jax.devices()[-1:]")


def _outer_site_packages() -> list[str]:
    """The site-packages folders of the interpreter running these tests: a venv's own
    (and the base installation's where that venv includes them), or a system install's."""
    found = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [folder for folder in dict.fromkeys(found) if Path(folder).is_dir()]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("installed")
    source = base / "source"  # build from a copy: no build/ or egg-info left in the checkout
    for name in ("conformance", "reference"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(base / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next((base / "dist").glob("pjit_double_conformance-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True)
    python = base / "venv" / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # A .pth file's folders go after the venv's own site-packages: the kit comes from the wheel.
    (Path(purelib) / "outer-site-packages.pth").write_text("".join(f"{d}\n" for d in _outer_site_packages()))
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    return python


def _project(tmp_path: Path, body: str) -> Path:
    package = tmp_path / "project" / "mypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(body))
    return tmp_path / "project"


def test_the_kit_is_imported_from_the_venv(venv: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(venv), "-c", "import conformance, sys; print(conformance.__file__, sys.prefix)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    kit_file, prefix = done.stdout.split()
    assert kit_file.startswith(prefix), done.stdout  # the wheel's copy, not this checkout


def test_installed_kit_passes_a_conforming_package(venv: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, GOOD)
    done, report = run_kit_report(
        "--pyargs",
        "conformance",
        "--impl",
        "mypkg:pjit_double",
        "--conformance-report",
        "out.json",  # relative: written in the project, where the user runs pytest
        cwd=project,
        python=str(venv),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert report is not None, done.stdout[-3000:]
    assert verdict(report) == "conforming"
    assert set(statuses(report).values()) == {"passed"}
    assert report["implementation"]["version"] == "1.2.3"  # the implementation's version


def test_installed_kit_fails_a_broken_package(venv: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, BAD)
    done, report = run_kit_report(
        "--pyargs",
        "conformance",
        "--impl",
        "mypkg:pjit_double",
        # The check that names the defect, and one it must pass: the installed kit judges the
        # package (the whole suite of a conforming package: the test above).
        "--check",
        "layout.default-device",
        "--check",
        "values.float32",
        cwd=project,
        python=str(venv),
    )
    assert done.returncode == 1, done.stdout[-3000:]
    assert report is not None and verdict(report) == "not conforming", done.stdout[-3000:]
    found = statuses(report)
    assert found["layout.default-device"] == "failed"
    assert found["values.float32"] == "passed"
    assert "result lies on device 7; the target is the first device" in done.stdout


def test_installed_plugin_stays_dormant_in_other_test_runs(venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "other"
    project.mkdir()
    (project / "test_mine.py").write_text(
        "import jax\n\ndef test_devices():\n    assert len(jax.devices()) == 1\n"
    )
    done = run_kit("test_mine.py", cwd=project, python=str(venv))
    assert done.returncode == 0, done.stdout[-3000:]  # the kit did not force 8 devices on this run
    assert "pjit_double conformance" not in done.stdout
    # A module of that project that fails to import is pytest's own collection error (exit 2),
    # not an internal error of the installed plug-in's progress line.
    (project / "test_broken.py").write_text("import no_such_module_anywhere\n")
    done = run_kit("test_broken.py", cwd=project, python=str(venv))
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ERROR collecting test_broken.py" in done.stdout, done.stdout[-3000:]
    assert "INTERNALERROR" not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
