"""Mutation score of the conformance kit: does it kill every mutant and pass every alternate?

    python tests/mutation_score.py [--profile default|ci|thorough] [-j 2] [--only NAME] [NAME ...]

Runs the FULL conformance suite (no --check) once per module in
tests/mutants/ (deliberately broken implementations, each of which must fail
at least one check) and tests/alternates/ (correct implementations written
differently, which must pass), and prints one line per module: killed or not,
the checks that failed, and how many Hypothesis examples the first failing
check took to fail ('-' where the run wrote no report).  Mutants run without
shrinking (tests/hypothesis_fast_fail.py; ``--shrink`` to shrink), so that
count is the examples it took to find one.  Then ``killed N / M`` and
``false failures on alternates: K / L``.  The exit status is 0 only when
every mutant is killed and no alternate fails.

Every verdict is read from the run's JSON report (``--conformance-report``),
never from its terminal output: a mutant is killed when some check's status
is "failed" or "crashed"; an alternate fails when some check's is, or when
its run does not end with exit status 0.

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
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script, python tests/mutation_score.py
    sys.path.insert(0, str(ROOT))

from tests.kit_process import BROKEN, REPORT_OPTION, child_env, read_report, statuses, verdict  # noqa: E402
from tests.kit_server import KitServer  # noqa: E402

TESTS = ROOT / "tests"
PROFILES = ("default", "ci", "thorough")
RUN_TIMEOUT = 900.0  # seconds for one whole subprocess run
FAST_FAIL_PLUGIN = "tests.hypothesis_fast_fail"


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
    """What one run of the conformance suite said: its exit status, output and JSON report."""

    subject: Subject
    profile: str
    returncode: int
    output: str  # for people (--verbose, test failures); nothing is read from it
    seconds: float
    report: dict[str, Any] | None = None  # the --conformance-report JSON; None if none was written

    @property
    def statuses(self) -> dict[str, str]:
        """check id -> status: passed, failed, crashed, inconclusive, xfailed, not applicable, ..."""
        return statuses(self.report) if self.report is not None else {}

    @property
    def messages(self) -> dict[str, str]:
        """check id -> why: the failure, or the reason it was inconclusive or skipped."""
        return {c["id"]: c["message"] for c in self.report["checks"]} if self.report is not None else {}

    @property
    def examples(self) -> dict[str, int]:
        """check id -> the Hypothesis examples it ran."""
        return {c["id"]: c["examples"] for c in self.report["checks"]} if self.report is not None else {}

    @property
    def verdict(self) -> str | None:
        """conforming, not conforming or partial; None if the run wrote no report."""
        return verdict(self.report) if self.report is not None else None

    @property
    def failed(self) -> list[str]:
        """The checks that found the implementation broken (failed or crashed), in report order."""
        return [c for c, s in self.statuses.items() if s in BROKEN]

    @property
    def killed(self) -> bool:
        return bool(self.failed)

    @property
    def false_failure(self) -> bool:
        """For an alternate: some check failed or crashed, or the run did not pass."""
        return bool(self.failed) or self.returncode != 0


def command(
    subject: Subject,
    profile: str,
    checks: tuple[str, ...] = (),
    report: Path | None = None,
    fast_fail: bool | None = None,
    in_process: bool = False,
    seed: int | None = None,
) -> list[str]:
    """The run's command line.  ``fast_fail`` (default: for mutants) loads
    tests/hypothesis_fast_fail.py: no shrinking, no example database.
    ``in_process``: ``-n 0``, the checks in the one process, without the
    supervisor's probe and worker (supervision has tests of its own).
    ``seed``: ``--hypothesis-seed``, the same draws (and covering schedule) every run."""
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
    if report is not None:
        cmd += [REPORT_OPTION, str(report)]
    if in_process:
        cmd += ["-n", "0"]
    if seed is not None:
        cmd += [f"--hypothesis-seed={seed}"]
    return cmd


def _environment() -> dict[str, str]:
    return child_env()  # Hypothesis would pick its own CI settings; the profile is chosen explicitly


def run_conformance(
    subject: Subject,
    profile: str = "default",
    checks: tuple[str, ...] = (),
    fast_fail: bool | None = None,
    in_process: bool = False,
    server: KitServer | None = None,
    seed: int | None = None,
) -> Run:
    """Run the suite on ``subject`` in a subprocess (cwd: the repository root), or with ``server``
    (``in_process`` runs only) in that warm kit process (tests/kit_server.py)."""
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        report = Path(tmp) / "report.json"
        start = time.perf_counter()
        argv = command(subject, profile, checks, report, fast_fail, in_process, seed)
        if server is not None and in_process:
            returncode, output = server.run(argv[3:], RUN_TIMEOUT)  # past ``python -m pytest``
        else:
            try:
                done = subprocess.run(
                    argv, cwd=ROOT, env=_environment(), capture_output=True, text=True, timeout=RUN_TIMEOUT
                )
                returncode, output = done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired as exc:
                returncode = -1
                parts = [
                    p.decode(errors="replace") if isinstance(p, bytes) else p or ""
                    for p in (exc.stdout, exc.stderr)
                ]
                output = "".join(parts) + f"\n[the run took more than {RUN_TIMEOUT:g} s]"
        seconds = time.perf_counter() - start
        return Run(subject, profile, returncode, output, seconds, read_report(report))


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
        verdict = "FAILED" if run.false_failure else "ok"
    first = failed[0] if failed else None
    examples = str(run.examples[first]) if first in run.examples else "-"
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
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="only this mutant or alternate (repeatable; the same as naming it)",
    )
    parser.add_argument("names", nargs="*", help="only these mutants/alternates (default: all)")
    args = parser.parse_args(argv)

    subjects = discover("mutants") + discover("alternates")
    names = [*args.names, *args.only]
    if names:
        subjects = [s for s in subjects if s.name in names]
        missing = set(names) - {s.name for s in subjects}
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
    false_failures = [r for r in alternates if r.false_failure]
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
