"""Mutation score of the conformance kit: does it kill every mutant and pass every alternate?

    python tests/mutation_score.py [--profile default|ci|thorough] [-j 2] [NAME ...]

Runs the FULL conformance suite (no --check) once per module in
tests/mutants/ (deliberately broken implementations, each of which must fail
at least one check) and tests/alternates/ (correct implementations written
differently, which must pass), and prints one line per module: killed or not,
the checks that failed, and how many Hypothesis examples the first failing
check took to fail (from the plug-in's summary table; '-' where it is not
printed).  Mutants run without shrinking (tests/hypothesis_fast_fail.py;
``--shrink`` to shrink), so that count is the examples it took to find one.
Then ``killed N / M`` and ``false failures on alternates: K / L``.  The exit
status is 0 only when every mutant is killed and no alternate fails.

A mutant module defines ``pjit_double``, a one-line docstring naming its
defect and ``KILLED_BY = ("check.id", ...)``: the checks that name the
defect, the primary one first.  Optional: ``CALL_TIMEOUT`` (seconds, for
mutants that hang).  An alternate may list ``INCONCLUSIVE = ("check.id",)``:
checks that may find it inconclusive (skipped), but never failed.

tests/test_mutants.py imports the helpers below; they need no JAX.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PROFILES = ("default", "ci", "thorough")
RUN_TIMEOUT = 900.0  # seconds for one whole subprocess run
FAST_FAIL_PLUGIN = "tests.hypothesis_fast_fail"
_NODE = re.compile(r"test_check\[([^\]]+)\]")
_FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) \S*::test_check\[([^\]]+)\]", re.MULTILINE)


@dataclass(frozen=True)
class Subject:
    """One module under tests/mutants or tests/alternates."""

    name: str
    path: Path
    kind: str  # "mutants" or "alternates"
    doc: str
    killed_by: tuple[str, ...] = ()
    inconclusive: tuple[str, ...] = ()
    call_timeout: float | None = None

    @property
    def spec(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:pjit_double"


def _constant(tree: ast.Module, name: str) -> object:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return None


def discover(kind: str) -> list[Subject]:
    """The modules of tests/<kind>, read without importing them (so without JAX)."""
    found = []
    for path in sorted((TESTS / kind).glob("*.py")):
        if path.name.startswith("_"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        timeout = _constant(tree, "CALL_TIMEOUT")
        found.append(
            Subject(
                name=path.stem,
                path=path,
                kind=kind,
                doc=(ast.get_docstring(tree) or "").strip(),
                killed_by=tuple(_constant(tree, "KILLED_BY") or ()),  # type: ignore[arg-type]
                inconclusive=tuple(_constant(tree, "INCONCLUSIVE") or ()),  # type: ignore[arg-type]
                call_timeout=float(timeout) if isinstance(timeout, (int, float)) else None,
            )
        )
    return found


@dataclass
class Run:
    """What one run of the conformance suite said."""

    subject: Subject
    profile: str
    returncode: int
    output: str
    seconds: float
    statuses: dict[str, str] = field(default_factory=dict)  # check id -> passed/failed/skipped/error
    messages: dict[str, str] = field(default_factory=dict)  # check id -> failure or skip message
    failed_lines: list[str] = field(default_factory=list)  # check ids from FAILED/ERROR summary lines
    examples: dict[str, str] = field(default_factory=dict)  # check id -> examples, from the summary table

    @property
    def failed(self) -> list[str]:
        ids = [c for c, s in self.statuses.items() if s in ("failed", "error")]
        return ids + [c for c in self.failed_lines if c not in ids]

    @property
    def killed(self) -> bool:
        return self.returncode != 0 and bool(self.failed)


def command(
    subject: Subject,
    profile: str,
    checks: tuple[str, ...] = (),
    junit: Path | None = None,
    fast_fail: bool | None = None,
) -> list[str]:
    """The run's command line.  ``fast_fail`` (default: for mutants) loads
    tests/hypothesis_fast_fail.py: no shrinking, no example database."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "conformance",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
        "--assert=plain",
        "--impl",
        subject.spec,
        "--hypothesis-profile",
        profile,
    ]
    if subject.kind == "mutants" if fast_fail is None else fast_fail:
        cmd += ["-p", FAST_FAIL_PLUGIN]
    for check_id in checks:
        cmd += ["--check", check_id]
    if subject.call_timeout is not None:
        cmd += ["--call-timeout", f"{subject.call_timeout:g}"]
    if junit is not None:
        cmd.append(f"--junitxml={junit}")
    return cmd


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CI", None)  # Hypothesis would pick its own CI settings; the profile is chosen explicitly
    env.pop("CONFORMANCE_IMPL", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _read_junit(path: Path, run: Run) -> None:
    if not path.is_file():
        return
    try:
        tree = ET.parse(path)
    except ET.ParseError:
        return
    for case in tree.iter("testcase"):
        match = _NODE.search(case.get("name", ""))
        if match is None:
            continue
        check_id, status, message = match.group(1), "passed", ""
        for tag in ("failure", "error", "skipped"):
            child = case.find(tag)
            if child is not None:
                status = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = child.get("message", "") or (child.text or "")
                break
        run.statuses[check_id] = status
        run.messages[check_id] = message


def _read_table(output: str, run: Run) -> None:
    """The plug-in's Markdown summary: | check | status | examples | ... (if it prints one)."""
    column = None
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            continue
        if "check" in cells and "examples" in cells:
            column = cells.index("examples")
            continue
        if column is not None and len(cells) > column and cells[0].startswith("`"):
            run.examples[cells[0].strip("`")] = cells[column]


def run_conformance(
    subject: Subject, profile: str = "default", checks: tuple[str, ...] = (), fast_fail: bool | None = None
) -> Run:
    """Run the suite on ``subject`` in a subprocess (cwd: the repository root)."""
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        junit = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        try:
            done = subprocess.run(
                command(subject, profile, checks, junit, fast_fail),
                cwd=ROOT,
                env=_environment(),
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
            )
            returncode, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            returncode = -1
            parts = [
                p.decode(errors="replace") if isinstance(p, bytes) else p or ""
                for p in (exc.stdout, exc.stderr)
            ]
            output = "".join(parts) + f"\n[the run took more than {RUN_TIMEOUT:g} s]"
        run = Run(subject, profile, returncode, output, time.perf_counter() - start)
        _read_junit(junit, run)
    run.failed_lines = list(dict.fromkeys(_FAILED_LINE.findall(output)))
    _read_table(output, run)
    return run


# ---------------------------------------------------------------------------
# The table


def _line(run: Run) -> str:
    subject = run.subject
    failed = run.failed
    if subject.kind == "mutants":
        verdict = "killed" if run.killed else "SURVIVED"
        if run.killed and subject.killed_by and subject.killed_by[0] not in failed:
            verdict = "killed*"  # killed, but not by its primary check
    else:
        verdict = "FAILED" if failed or run.returncode != 0 else "ok"
    first = failed[0] if failed else None
    examples = run.examples.get(first, "-") if first else "-"
    checks = ", ".join(failed) if failed else "-"
    return f"{subject.name:<30} {verdict:<9} {examples:>8} {run.seconds:6.1f}s  {checks}"


def _explain(run: Run) -> str:
    tail = "\n".join(run.output.strip().splitlines()[-40:])
    return f"--- {run.subject.kind}/{run.subject.name} (exit {run.returncode}) ---\n{tail}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=PROFILES, default="default")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="concurrent runs (default 2)")
    parser.add_argument(
        "--shrink",
        action="store_true",
        help="let Hypothesis shrink mutants' failures (slow; by default a failing check "
        "stops at its first failing example, see tests/hypothesis_fast_fail.py)",
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="print the output's tail for survivors and failing alternates",
    )
    parser.add_argument("names", nargs="*", help="only these mutants/alternates (default: all)")
    args = parser.parse_args(argv)

    subjects = discover("mutants") + discover("alternates")
    if args.names:
        subjects = [s for s in subjects if s.name in args.names]
        missing = set(args.names) - {s.name for s in subjects}
        if missing:
            parser.error(f"no mutant or alternate called {', '.join(sorted(missing))}")
    print(
        f"profile {args.profile}: {len(subjects)} runs of the full suite, {args.jobs} at a time", flush=True
    )
    print(f"{'name':<30} {'verdict':<9} {'examples':>8} {'time':>7}  failed checks", flush=True)
    start = time.perf_counter()
    runs: dict[str, Run] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        fast_fail = False if args.shrink else None
        futures = {pool.submit(run_conformance, s, args.profile, (), fast_fail): s for s in subjects}
        for future in concurrent.futures.as_completed(futures):
            run = future.result()
            runs[run.subject.kind + "/" + run.subject.name] = run
            print(_line(run), flush=True)

    mutants = [r for r in runs.values() if r.subject.kind == "mutants"]
    alternates = [r for r in runs.values() if r.subject.kind == "alternates"]
    killed = [r for r in mutants if r.killed]
    survivors = [r for r in mutants if not r.killed]
    false_failures = [r for r in alternates if r.failed or r.returncode != 0]
    off_target = [r for r in killed if r.subject.killed_by and r.subject.killed_by[0] not in r.failed]
    print()
    if survivors:
        print("survivors: " + ", ".join(sorted(r.subject.name for r in survivors)))
    if off_target:
        print(
            "killed, but not by their primary check (*): "
            + ", ".join(f"{r.subject.name} ({r.subject.killed_by[0]})" for r in off_target)
        )
    if false_failures:
        print("failing alternates: " + ", ".join(sorted(r.subject.name for r in false_failures)))
    if args.verbose:
        for run in survivors + false_failures:
            print(_explain(run))
    print(f"killed {len(killed)} / {len(mutants)}")
    print(f"false failures on alternates: {len(false_failures)} / {len(alternates)}")
    print(f"profile {args.profile}, {time.perf_counter() - start:.0f} s wall")
    return 0 if not survivors and not false_failures else 1


if __name__ == "__main__":
    sys.exit(main())
