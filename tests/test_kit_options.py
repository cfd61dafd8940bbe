"""Every option is checked before anything runs: a bad one is one usage-error line, a good one works.

One table, each row a real ``python -m pytest conformance ...`` process: the
arguments and environment, the exit status, and a pattern for the one
``ERROR:`` line (usage errors) or for the output (runs that work).  The rows
run two at a time from the first test on (under pytest-xdist, each worker
runs its own rows as they come).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from conformance._src.inputs.case import Case, encode, make_mesh
from tests.conftest import REPO_ROOT
from tests.kit_process import child_env

# Tokens of cases (the test process has 8 devices: conftest.py).
F32 = encode(Case(np.arange(4, dtype=np.float32)))
F64 = encode(Case(np.arange(4, dtype=np.float64)))
ON_MESH = encode(Case(np.arange(4, dtype=np.float32), make_mesh([0, 1], (2,), ("data",)), "mesh"))
ON_DEVICE_5 = encode(Case(np.arange(4, dtype=np.float32), make_mesh([5, 0], (2,), ("data",)), "mesh"))
INDIVISIBLE = encode(Case(np.arange(3, dtype=np.float32), make_mesh([0, 1], (2,), ("data",)), "mesh"))

# Files the rows use, in one folder per session that replaces {tmp} in the arguments.
FILES: dict[str, bytes] = {
    "latin1.txt": b"# expected failures\ncompile.once  caf\xe9 is not UTF-8\n",
    "tabs.txt": b"compile.once\twe rebuild the jit per call\n",
    "tab-unknown.txt": b"no.such-check\tsome reason\n",
    "a-file": b"not a folder\n",
    "r.json/keep": b"",  # r.json is a folder: the JSON beside r.md cannot be written
    # First on PYTHONPATH: a JAX whose import fails, as one built for another jaxlib does.
    "broken-jax/jax/__init__.py": b"raise ImportError('this jax needs another jaxlib (a test)')\n",
}
HAS_GPU = shutil.which("nvidia-smi") is not None or Path("/dev/nvidia0").exists()
IN_PROCESS = ["-n", "0"]  # the checks run in this one process (pytest-xdist is a dependency of the kit)


@dataclass(frozen=True)
class Row:
    argv: tuple[str, ...]
    status: int | None  # None: anything but a usage error (a replay or a collection)
    pattern: str  # usage error: searched in the ERROR: line; else in the whole output
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120


def usage(*argv: str, error: str, env: dict[str, str] | None = None) -> Row:
    return Row(argv, 4, error, env or {})


def works(*argv: str, output: str, status: int | None = 0, env: dict[str, str] | None = None) -> Row:
    return Row((*IN_PROCESS, *argv), status, output, env or {}, timeout=400)


ROWS: dict[str, Row] = {
    # --devices
    "devices-0": usage("--devices", "0", error=r"^--devices must be at least 1, got 0$"),
    "devices-negative": usage("--devices=-3", error=r"^--devices must be at least 1, got -3$"),
    # Too few devices for the whole contract: it runs, and is PARTIAL (exit 2), saying why.
    "devices-1-works": works(
        "-rA",
        "--devices",
        "1",
        output=r"(?s)^(?=.*not applicable: needs 2 devices)(?=.*not applicable: needs 4 devices)"
        r"(?=.*conformance: PARTIAL: the whole contract was not judged -- 3 check\(s\) need more devices)",
        status=2,
    ),
    "devices-3-works": works(
        "-rA",
        "--devices",
        "3",
        output=r"(?s)^(?=.*not applicable: needs 4 devices)(?=.*lack the meshes 3 device\(s\) cannot make)",
        status=2,
    ),
    # --call-timeout
    **{
        f"call-timeout-{value}": usage(
            f"--call-timeout={value}",
            error=rf"^--call-timeout {value}: give a finite number of seconds above 0",
        )
        for value in ("0", "-5", "inf", "nan")
    },
    # --case
    "case-without-one-check": usage("--case", F32, error=r"give exactly one --check ID$"),
    "case-not-a-token": usage(
        "--check", "values.float32", "--case", "not-a-token", error=r"^--case: not a valid case token: "
    ),
    "case-float64-in-seed": usage(
        "--contract",
        "seed",
        "--check",
        "values.float32",
        "--case",
        F64,
        error=r"^--case: the case is not in the seed contract: dtype float64",
    ),
    "case-float64-without-x64": usage(
        "--check", "values.all-dtypes", "--case", F64, error=r"dtype float64 needs JAX_ENABLE_X64=1$"
    ),
    "case-mesh-in-seed": usage(
        "--contract",
        "seed",
        "--check",
        "layout.shards",
        "--case",
        ON_MESH,
        error=r"^--case: the case is not in the seed contract: .*without a mesh$",
    ),
    "case-for-a-check-without-cases": usage(
        "--check", "call.smoke", "--case", F32, error=r"^--case: --check call.smoke takes no case"
    ),
    "case-the-check-never-draws": usage(
        "--check",
        "layout.default-device",
        "--case",
        ON_MESH,
        error=r"^--case: --check layout.default-device never draws",
    ),
    "case-indivisible-for-values": usage(
        "--check", "values.float32", "--case", INDIVISIBLE, error=r"never draws this case \(length 3, "
    ),
    "case-on-a-missing-device": usage(
        "--devices",
        "2",
        "--check",
        "layout.mesh",
        "--case",
        ON_DEVICE_5,
        error=r"uses device 5, but --devices 2",
    ),
    "case-replay-works": works(
        "--check", "layout.mesh", "--case", ON_MESH, output=r"test_check\[layout\.mesh\] PASSED", status=None
    ),
    # --hypothesis-profile
    "profile-ci-where-ci-is-detected": works(
        "--check", "call.smoke", output=r"profile `ci`, 8 devices", status=2, env={"CI": "true"}
    ),
    "hypothesis-profile-unknown": usage(
        "--hypothesis-profile",
        "nope",
        error=r"^--hypothesis-profile nope: no such profile; known profiles: (.*, )?ci, default, thorough\b",
    ),
    # --xfail-file
    "xfail-file-not-utf8": usage("--xfail-file", "{tmp}/latin1.txt", error=r"latin1\.txt, line 2: not UTF-8"),
    "xfail-file-missing": usage("--xfail-file", "{tmp}/missing.txt", error=r"missing\.txt: cannot read it"),
    "xfail-file-tab-unknown-id": usage(
        "--xfail-file", "{tmp}/tab-unknown.txt", error=r"line 1: no check has the ID 'no\.such-check' "
    ),
    "xfail-file-tab-works": works(
        "--collect-only", "--xfail-file", "{tmp}/tabs.txt", output=r"test_check\[compile\.once\]", status=None
    ),
    # --conformance-report
    "report-under-a-file": usage(
        "--conformance-report", "{tmp}/a-file/report.json", error=r"^--conformance-report .*: cannot write"
    ),
    "report-json-beside-md-unwritable": usage(
        "--conformance-report",
        "{tmp}/r.md",
        error=r"^--conformance-report .*r\.md: cannot write .*r\.json \(",
    ),
    # JAX_PLATFORMS
    "jax-platforms-cuda-without-gpu": usage(
        error=r"^conformance: JAX's backend could not start for JAX_PLATFORMS=cuda: .+; unset JAX_PLATFORMS",
        env={"JAX_PLATFORMS": "cuda"},
    ),
    "jax-platforms-unknown": usage(
        error=r"^conformance: JAX's backend could not start for JAX_PLATFORMS=nosuch: .*nosuch",
        env={"JAX_PLATFORMS": "nosuch"},
    ),
    # --impl / CONFORMANCE_IMPL
    "impl-empty": usage("--impl", "", error=r"^--impl is empty: give MODULE:ATTR"),
    "impl-env-empty": usage(
        error=r"^CONFORMANCE_IMPL is set but empty: give MODULE:ATTR", env={"CONFORMANCE_IMPL": ""}
    ),
    # The kit's dependencies
    "jax-will-not-import": usage(
        error=r"^the kit needs jax, which .* cannot import \(this jax needs another jaxlib \(a test\)\): "
        r"install the kit",
        env={"PYTHONPATH": "{tmp}/broken-jax"},
    ),
    # --distributed's numbers
    "num-processes-0": usage("--num-processes", "0", error=r"^--num-processes 0: give at least 1 process$"),
}


def _argv(row: Row, tmp: Path) -> list[str]:
    args = [a.replace("{tmp}", str(tmp)) for a in row.argv]
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "conformance", *args]


def _run(row: Row, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(row, tmp),
        cwd=REPO_ROOT,
        env=child_env(**{k: v.replace("{tmp}", str(tmp)) for k, v in row.env.items()}),
        capture_output=True,
        text=True,
        timeout=row.timeout,
        stdin=subprocess.DEVNULL,
    )


class Runs:
    """The rows' runs: started on first request, two at a time."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.futures: dict[str, Future[subprocess.CompletedProcess[str]]] = {}

    def start(self, name: str) -> None:
        if name not in self.futures:
            self.futures[name] = self.pool.submit(_run, ROWS[name], self.tmp)

    def result(self, name: str) -> subprocess.CompletedProcess[str]:
        self.start(name)
        return self.futures[name].result()


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Every selected row started at once; under pytest-xdist each worker starts its rows as they come."""
    tmp = tmp_path_factory.mktemp("kit-options")
    for name, data in FILES.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data)
    started = Runs(tmp)
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # a worker gets only some of the rows
        for item in request.session.items:
            if getattr(item, "originalname", None) == TEST_NAME and hasattr(item, "callspec"):
                started.start(item.callspec.params["name"])
    yield started
    started.pool.shutdown(wait=True, cancel_futures=True)


def _show(result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"$ {' '.join(result.args)}\n-> exit {result.returncode}\n"
        f"--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
    )


TEST_NAME = "test_an_option_is_one_usage_error_line_or_works"


@pytest.mark.parametrize("name", list(ROWS))
def test_an_option_is_one_usage_error_line_or_works(name: str, runs: Runs) -> None:
    row = ROWS[name]
    if name == "jax-platforms-cuda-without-gpu" and HAS_GPU:
        pytest.skip("this machine has a GPU: JAX_PLATFORMS=cuda may start")
    result = runs.result(name)
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "INTERNALERROR" not in output, _show(result)
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    if row.status == 4:
        assert result.returncode == 4, _show(result)
        assert len(errors) == 1, _show(result)
        assert re.search(row.pattern, errors[0].removeprefix("ERROR: ")), _show(result)
        return
    if row.status is None:
        assert result.returncode != 4 and not errors, _show(result)
    else:
        assert result.returncode == row.status, _show(result)
    assert re.search(row.pattern, output), _show(result)


def test_contract_choices_are_the_contracts() -> None:
    """--contract's choices are spelled out in plugin.py (importing Contract imports JAX): they agree."""
    from conformance import plugin
    from conformance._src.declared.terms import NAMES

    seen: dict[str, dict[str, object]] = {}

    class Group:
        def addoption(self, name: str, **attrs: object) -> None:
            seen[name] = attrs

    class Parser:
        def getgroup(self, *args: object) -> Group:
            return Group()

        def addini(self, *args: object, **kwargs: object) -> None:
            pass

    class Manager:
        def register(self, *args: object) -> None:
            pass

    plugin.pytest_addoption(Parser(), Manager())  # type: ignore[arg-type]
    # The named contracts are pjit_double's; anything else is a declared contract's MODULE:ATTR.
    assert seen["--contract"]["metavar"] == "|".join([*NAMES, "MODULE:ATTR"])


def test_importing_the_plug_in_leaves_jax_unimported() -> None:
    """A dormant plug-in (every other test run where the kit is installed) costs no JAX import."""
    code = "import sys, conformance.plugin; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
