"""The version matrix: the kit on the oldest and on the newest versions pyproject.toml admits.

    python .ci/matrix.py [--set oldest|newest] [--mutant NAME] [--keep]

Each version set gets a fresh venv and three runs of the suite, with
``--hypothesis-profile ci``:

* ``oldest``: the lowest Python of ``requires-python`` and every floor of
  ``dependencies`` pinned exactly (``jax>=0.7`` -> ``jax==0.7``), then the kit
  installed the way the README's "Gating CI" job installs it,
  ``pip install ./pjit-double-conformance .``, beside a small project whose
  package ``mypkg`` is the correct alternate; the runs are made from that
  project, ``--pyargs conformance``, the alternate as ``--impl mypkg:pjit_double``.
* ``newest``: the highest Python of the classifiers, and the README's first
  Quick start line, ``pip install -e .`` (the newest release of every
  dependency) then ``python -m pytest conformance`` in this checkout; the
  alternate run adds ``-n 2``.

The runs: the bundled reference (expected exit 0), a mutant from
``tests/mutants/`` (expected exit 1) and the alternate
``tests/alternates/times_two.py`` (expected exit 0). It prints the versions
installed, a table of exit statuses and wall times, and exits 1 if any step
did not end as expected (the log of each such step is printed).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# The README's own lines, run as written (checked against README.md before anything runs).
QUICK_START = "pip install -e . && python -m pytest conformance"
GATING_INSTALL = "pip install ./pjit-double-conformance ."
GATING_RUN = (
    "python -m pytest --pyargs conformance --impl mypkg:pjit_double"
    " --hypothesis-profile ci --xfail-file conformance-xfail.txt --conformance-report conformance.md"
)

PROFILE = ("--hypothesis-profile", "ci")
DEFAULT_MUTANT = "seed_no_mesh_keyword"  # its gate check fails on the first call: exit 1 in seconds
ALTERNATE = "times_two"
SHOWN = ("jax", "jaxlib", "numpy", "ml_dtypes", "hypothesis", "pytest", "pytest-xdist")
LOG_TAIL = 80  # lines of a failed step's log to print

PROJECT_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "mypkg"
version = "1.0"
"""  # setuptools finds mypkg itself, beside the kit's checkout


def floors() -> dict[str, str]:
    """Each dependency's floor, ``name>=X`` in pyproject.toml; every dependency must have one."""
    found = {}
    for requirement in PYPROJECT["project"]["dependencies"]:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*", requirement)
        if match is None:
            raise SystemExit(f"matrix: {requirement!r} in pyproject.toml is not NAME>=FLOOR")
        found[match[1]] = match[2]
    return found


def python_versions() -> tuple[str, str]:
    """(oldest, newest) supported Python: requires-python's floor and the highest classifier."""
    floor = re.fullmatch(r">=\s*(3\.\d+)", PYPROJECT["project"]["requires-python"].strip())
    if floor is None:
        raise SystemExit("matrix: requires-python in pyproject.toml is not >=3.N")
    listed = [
        c.rsplit("::", 1)[1].strip()
        for c in PYPROJECT["project"].get("classifiers", [])
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    if not listed:
        raise SystemExit("matrix: pyproject.toml lists no 'Programming Language :: Python :: 3.N' classifier")
    return floor[1], max(listed, key=lambda v: int(v.split(".")[1]))


def find_python(version: str) -> str:
    """An interpreter of ``version``: pythonX.Y on PATH, else one that pyenv installed."""
    candidates = [shutil.which(f"python{version}")]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(str(p) for p in pyenv_root.glob(f"versions/{version}.*/bin/python{version}"))
    for candidate in filter(None, candidates):
        done = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0 and done.stdout.strip() == version:
            return candidate
    raise SystemExit(f"matrix: no Python {version} found (python{version} on PATH, or pyenv's)")


@dataclass
class Step:
    name: str
    expected: int
    returncode: int | None = None
    seconds: float = 0.0
    log: Path | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == self.expected

    def cell(self) -> str:
        if self.returncode is None:
            return "not run"
        mark = "ok" if self.ok else f"EXPECTED {self.expected}"
        return f"exit {self.returncode} {mark}, {self.seconds:.0f} s"


@dataclass
class VersionSet:
    name: str
    python: str
    steps: list[Step] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    def step(self, name: str, expected: int = 0) -> Step:
        found = Step(name, expected)
        self.steps.append(found)
        return found


class Runner:
    def __init__(self, work: Path) -> None:
        self.work = work

    def run(self, vset: VersionSet, step: Step, command: str | list[str], cwd: Path, venv: Path) -> bool:
        """Run ``command`` (a shell line or an argv) with ``venv`` activated; log to a file."""
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")}
        env.update(
            VIRTUAL_ENV=str(venv),
            PATH=os.pathsep.join([str(venv / "bin"), env.get("PATH", "")]),
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            PYTHONDONTWRITEBYTECODE="1",  # leave no __pycache__ in the checkout from another Python
        )
        step.log = self.work / f"{vset.name}-{step.name}.log"
        shown = (
            command
            if isinstance(command, str)
            else " ".join(c if "\n" not in c else "SCRIPT" for c in command)
        )
        print(f"[{vset.name}] {step.name}: $ {shown}", flush=True)
        start = time.monotonic()
        with step.log.open("w") as log:
            log.write(f"$ {shown}\n(in {cwd})\n")
            log.flush()
            done = subprocess.run(
                command,
                shell=isinstance(command, str),
                executable="/bin/bash" if isinstance(command, str) else None,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        step.seconds = time.monotonic() - start
        step.returncode = done.returncode
        print(f"[{vset.name}] {step.name}: {step.cell()}", flush=True)
        return step.ok


def make_venv(runner: Runner, vset: VersionSet) -> tuple[Path, Step]:
    venv = runner.work / f"venv-{vset.name}"
    step = vset.step("venv")
    runner.run(vset, step, [vset.python, "-m", "venv", str(venv)], runner.work, venv)
    return venv, step


def record_versions(
    runner: Runner, vset: VersionSet, venv: Path, pins: dict[str, str], installed: bool
) -> bool:
    """Read what the venv holds; check each of ``pins`` is exactly that version, and, if
    ``installed``, that the kit is imported from the venv's site-packages, not a checkout."""
    probe = (
        "import importlib.metadata as m, json, sys, conformance\n"
        "from packaging.version import Version\n"
        f"names = {list(SHOWN)!r}; pins = {pins!r}; installed = {installed!r}\n"
        "got = {n: m.version(n) for n in names}\n"
        "got['python'] = '%d.%d.%d' % sys.version_info[:3]\n"
        "print(json.dumps(got))\n"
        "print('kit from', conformance.__file__)\n"
        "wrong = {n: (got[n], p) for n, p in pins.items() if Version(got[n]) != Version(p)}\n"
        "assert not wrong, f'installed (got, pinned): {wrong}'\n"
        "assert conformance.__file__.startswith(sys.prefix) or not installed, 'not the installed kit'\n"
    )
    step = vset.step("versions")
    ok = runner.run(vset, step, [str(venv / "bin" / "python"), "-c", probe], runner.work, venv)
    if step.log is not None and step.log.exists():
        for line in step.log.read_text().splitlines():
            if line.startswith("{"):
                vset.versions = json.loads(line)
    return ok


def suite_runs(
    runner: Runner, vset: VersionSet, venv: Path, cwd: Path, base: list[str], alternate: str, mutant: str
) -> None:
    python = str(venv / "bin" / "python")
    mutant_spec = f"{ROOT / 'tests' / 'mutants' / mutant}.py:pjit_double"
    runner.run(vset, vset.step("reference", 0), [python, *base, *PROFILE], cwd, venv)
    runner.run(vset, vset.step("mutant", 1), [python, *base, *PROFILE, "--impl", mutant_spec], cwd, venv)
    argv = [python, *base, *alternate.split()]
    runner.run(
        vset,
        vset.step("alternate", 0),
        argv if "--hypothesis-profile" in argv else [*argv, *PROFILE],
        cwd,
        venv,
    )


def oldest(runner: Runner, vset: VersionSet, mutant: str) -> None:
    pins = floors()
    venv, made = make_venv(runner, vset)
    if not made.ok:
        return
    pinned = " ".join(f"'{name}=={floor}'" for name, floor in pins.items())
    if not runner.run(vset, vset.step("pin floors"), f"pip install {pinned}", runner.work, venv):
        return
    # The user's project, with the kit checked out beside it as the README's Gating CI job does.
    project = runner.work / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PROJECT_PYPROJECT)
    shutil.copy(ROOT / "tests" / "alternates" / f"{ALTERNATE}.py", project / "mypkg" / "__init__.py")
    (project / "conformance-xfail.txt").write_text("")  # nothing expected to fail
    shutil.copytree(
        ROOT,
        project / "pjit-double-conformance",
        ignore=shutil.ignore_patterns(
            ".git", "__pycache__", "*.egg-info", "build", "dist", ".venv", ".*_cache", ".hypothesis"
        ),
    )
    if not runner.run(vset, vset.step("gating install"), GATING_INSTALL, project, venv):
        return
    if not record_versions(runner, vset, venv, pins, installed=True):
        return
    gating = GATING_RUN.split()  # the alternate's run is the README's run line
    suite_runs(runner, vset, venv, project, gating[1:5], " ".join(gating[5:]), mutant)
    report = project / "conformance.md"
    if vset.steps[-1].ok and not (report.exists() and report.with_suffix(".json").exists()):
        vset.steps[-1].returncode = -1  # the Gating CI job's report step would find nothing
        print(f"[{vset.name}] alternate: no {report.name} (or its JSON) written", flush=True)


def newest(runner: Runner, vset: VersionSet, mutant: str) -> None:
    venv, made = make_venv(runner, vset)
    if not made.ok:
        return
    install, run = (part.strip() for part in QUICK_START.split("&&"))
    if not runner.run(vset, vset.step("quick start install"), install, ROOT, venv):
        return
    if not record_versions(runner, vset, venv, {}, installed=False):
        return
    alternate = f"--impl tests/alternates/{ALTERNATE}.py:pjit_double -n 2"
    suite_runs(runner, vset, venv, ROOT, run.split()[1:], alternate, mutant)


def check_readme() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())  # a folded YAML line is one line
    missing = [line for line in (QUICK_START, GATING_INSTALL, GATING_RUN) if line not in readme]
    if missing:
        raise SystemExit(f"matrix: README.md no longer says {missing}: update .ci/matrix.py with it")


def table(sets: list[VersionSet]) -> str:
    columns = ["python", *SHOWN]
    lines = ["| set | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for vset in sets:
        lines.append(f"| {vset.name} | " + " | ".join(vset.versions.get(c, "?") for c in columns) + " |")
    steps = ["install", "reference", "mutant", "alternate"]
    lines += ["", "| set | " + " | ".join(steps) + " | total |", "|---" * (len(steps) + 2) + "|"]
    for vset in sets:
        by_name = {s.name: s for s in vset.steps}
        setup = [s for s in vset.steps if s.name not in steps[1:]]
        failed = next((s for s in setup if not s.ok), None)
        install = f"FAILED at {failed.name}" if failed else f"ok, {sum(s.seconds for s in setup):.0f} s"
        cells = [install] + [by_name[n].cell() if n in by_name else "not run" for n in steps[1:]]
        total = sum(s.seconds for s in vset.steps)
        lines.append(f"| {vset.name} | " + " | ".join(cells) + f" | {total:.0f} s |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("oldest", "newest"), action="append", help="default: both")
    parser.add_argument("--mutant", default=DEFAULT_MUTANT, help="a module of tests/mutants/")
    parser.add_argument("--keep", action="store_true", help="keep the venvs and logs (the folder is printed)")
    args = parser.parse_args()
    if not (ROOT / "tests" / "mutants" / f"{args.mutant}.py").exists():
        parser.error(f"no tests/mutants/{args.mutant}.py")
    check_readme()
    low, high = python_versions()
    chosen = args.set or ["oldest", "newest"]
    sets = [VersionSet(name, find_python(low if name == "oldest" else high)) for name in chosen]
    work = Path(tempfile.mkdtemp(prefix="kit-matrix-"))
    runner = Runner(work)
    start = time.monotonic()
    try:
        # The sets side by side: each is mostly one process at a time (an install, then a run).
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(sets)) as pool:
            done = [
                pool.submit(oldest if vset.name == "oldest" else newest, runner, vset, args.mutant)
                for vset in sets
            ]
            for future in done:
                future.result()
        failed = [s for vset in sets for s in vset.steps if not s.ok]
        for step in failed:
            if step.log is not None and step.log.exists():
                tail = step.log.read_text().splitlines()[-LOG_TAIL:]
                print(f"\n----- {step.log.name} (last {len(tail)} lines) -----", *tail, sep="\n")
        print(f"\nversion matrix (mutant {args.mutant}, alternate {ALTERNATE}):\n")
        print(table(sets))
        print(f"\nmatrix: {'FAILED' if failed else 'ok'} in {time.monotonic() - start:.0f} s")
        return 1 if failed else 0
    finally:
        if args.keep:
            print(f"matrix: venvs and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
