"""Set-up for the kit's own tests (``pytest tests``).

The test process gets 8 forced CPU devices at import time, before anything
can start JAX's backend (the kit's plug-in stays dormant for ``pytest tests``).

Tests marked ``slow`` (whole runs of the suite on correct implementations,
multi-process jobs, the heaviest supervision runs) are left out of a plain
``pytest tests``; ``--slow`` adds them (CI runs them so: .ci/run), and ``-m slow``
runs only them.

Tests that need fresh processes (the backend starts once per process) mark
themselves with ``@pytest.mark.background(key, argv, env=..., files=...)``.
Those runs are started as soon as collection ends, two at a time, and the
tests that wait for them are moved to the end, so the runs overlap with the
in-process tests; a test takes its run's result from the ``bg_run`` fixture.
``files`` are written into one temporary folder per session, which replaces
``{tmp}`` in ``argv`` and is put on PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conformance._src.calling.devices import ensure_host_devices
from tests.kit_process import child_env
from tests.kit_server import KitServer

TEST_DEVICES = 8
ensure_host_devices(TEST_DEVICES)

REPO_ROOT = Path(__file__).resolve().parents[1]  # found from this file, not from the cwd
RUN_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class Run:
    """What a finished child process did."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __str__(self) -> str:  # shown by failing assertions
        return (
            f"$ {' '.join(self.argv)}\n-> exit {self.returncode}\n"
            f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}"
        )


@dataclass
class Background:
    tmp: Path
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=2))
    futures: dict[str, Future[Run]] = field(default_factory=dict)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def start(
        self,
        key: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        files: dict[str, str] | None = None,
    ) -> None:
        if key in self.futures:
            return
        for name, text in (files or {}).items():
            # "project/pytest.ini": a folder of its own, as a user's project is
            (self.tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (self.tmp / name).write_text(text)
        full = tuple(a.replace("{tmp}", str(self.tmp)) for a in argv)
        environment = child_env(self.tmp, **(env or {}))
        self.futures[key] = self.pool.submit(self._run, full, environment)

    def _run(self, argv: tuple[str, ...], env: dict[str, str]) -> Run:
        with self.lock:
            if self.closed:
                raise RuntimeError("the test session ended before this run started")
            proc = subprocess.Popen(
                argv, cwd=REPO_ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            self.procs.append(proc)
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += f"\n[tests/conftest.py: killed after {RUN_TIMEOUT_S:g} s]"
        return Run(argv, proc.returncode, out, err)

    def result(self, key: str) -> Run:
        return self.futures[key].result()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for proc in self.procs:
                if proc.poll() is None:
                    proc.kill()  # only processes this session started
        self.pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


_BACKGROUND_KEY = pytest.StashKey[Background]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help="the kit's tests: also run the ones marked slow (whole-suite runs; CI runs them: .ci/run)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "background(key, argv, env=None, files=None): a child process this test inspects"
    )
    config.addinivalue_line(
        "markers",
        "slow: a whole run of the suite on a correct implementation, or many processes (-m slow, --slow)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests are left out unless asked for (``--slow``, as CI runs them, or any ``-m``
    expression).  Those asked for go first, so that xdist hands the longest runs out before the
    short ones, which then fill the workers' last minutes; tests that wait for a child process
    go last, so that the in-process ones run meanwhile."""
    if not config.getoption("--slow") and not config.getoption("markexpr"):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    items[:] = sorted(
        items,
        key=lambda item: (
            item.get_closest_marker("slow") is None,
            item.get_closest_marker("background") is not None,
        ),
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    background = Background(Path(tempfile.mkdtemp(prefix="kit-tests-")))
    session.config.stash[_BACKGROUND_KEY] = background
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # each worker runs a share of the tests: start a run when its test asks (bg_run)
    for item in session.items:
        for mark in item.iter_markers("background"):
            background.start(*mark.args, **mark.kwargs)


def pytest_unconfigure(config: pytest.Config) -> None:
    background = config.stash.get(_BACKGROUND_KEY, None)
    if background is not None:
        background.close()


@pytest.fixture(scope="session")
def background(request: pytest.FixtureRequest) -> Background:
    return request.config.stash[_BACKGROUND_KEY]


@pytest.fixture
def bg_run(request: pytest.FixtureRequest, background: Background) -> Run:
    """The finished run named by this test's (one) background mark."""
    marks = list(request.node.iter_markers("background"))
    assert len(marks) == 1, "bg_run needs exactly one @pytest.mark.background"
    background.start(*marks[0].args, **marks[0].kwargs)  # already started unless under xdist
    return background.result(marks[0].args[0])


@pytest.fixture(scope="session")
def kit_server() -> Iterator[KitServer]:
    """A warm kit process for this pytest-xdist worker's runs of the suite (tests/kit_server.py)."""
    server = KitServer(child_env())
    yield server
    server.close()
