"""Mutation score of the conformance kit: does it kill every mutant and pass every alternate, and how often?

    python tests/mutation_score.py [--profile default|ci|thorough] [--runs N] [-j 2] [NAME ...]

Runs the FULL conformance suite (no --check) on each module of
tests/mutants/ (deliberately broken implementations, each of which must fail
every check its ``KILLED_BY`` names) and tests/alternates/ (correct
implementations written differently, which must pass), ``--runs N`` times
each (default 1), every run a fresh process with fresh draws: no
``--hypothesis-seed`` is given, so the default and thorough profiles draw new
examples and a new covering schedule each run (the report's ``schedule_seed``;
the ci profile is derandomized, so ``--runs`` above 1 is refused with it), and
each run has an empty Hypothesis storage directory of its own, so no run
replays examples another run saved.  Mutants run without shrinking
(tests/hypothesis_fast_fail.py; ``--shrink`` to shrink): a failing check stops
at its first failing example, and every check runs (no gate is failed by
a mutant that lists other checks), so every check of ``KILLED_BY`` is judged
in every run.

It prints one line per run: the verdict (``killed``; ``killed*`` when a check
of its ``KILLED_BY`` did not fail, named after ``KILLED_BY missed:``;
``SURVIVED``; for alternates ``ok`` or ``FAILED``), the examples the first
failing check took, the time, the schedule seed and the checks that failed.
With ``--runs N`` above 1 it then prints, per mutant, ``killed k/N`` with the
rate and, per check of ``KILLED_BY``, in how many of the N runs it failed; per
alternate ``false failures k/N`` and the checks that failed.  Last the totals:
mutants killed (in every run), ``KILLED_BY`` claims verified (the check failed
in every run), and alternates that failed.  The exit status is 0 only when
every mutant is killed in every run with every check of its ``KILLED_BY``
failing, and no alternate fails in any run.

``--ledger FILE`` keeps every run: each one, as it ends, is appended to FILE
as one JSON line (the subject, the profile, a digest of the kit and of the
subject, the exit status, the time, the schedule seed and every check's
status and examples).  With a ledger, ``--runs N`` counts the runs FILE
already holds for the same subject, profile and digests, and runs only the
ones missing; the rates are printed over all N.  So a measurement that takes
longer than one sitting is resumed, and one whose kit has changed since
starts again (the digest covers conformance/, conftest.py, pyproject.toml,
tests/hypothesis_fast_fail.py, tests/kit_process.py, the subject's module and
the versions of Python, JAX, jaxlib, Hypothesis and pytest).
``--from-ledger`` prints the table from FILE alone, running nothing.

Every verdict is read from the run's JSON report (``--conformance-report``),
never from its terminal output: a mutant is killed when some check's status
is "failed" or "crashed"; an alternate fails when some check's is, or when
its run does not end with exit status 0.

A mutant module defines ``pjit_double``, a one-line docstring naming its
defect and ``KILLED_BY = ("check.id", ...)``: the checks that catch the
defect, the primary one first.  Optional: ``DEVICES`` (the ``--devices`` its
defect needs), ``CALL_TIMEOUT`` (seconds, for
mutants that hang).  An alternate may list ``INCONCLUSIVE = ("check.id",)``:
checks that may find it inconclusive (skipped), but never failed.

tests/test_mutants.py imports the helpers below; they need no JAX.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
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
    devices: int | None = None  # DEVICES: the --devices the defect needs (ids of two digits: 12+)
    function: str = "pjit_double"
    contract: str | None = None  # --contract, for a function of examples/contracts/

    @property
    def spec(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.function}"


def _constant(tree: ast.Module, name: str) -> object:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return None


def discover_examples() -> list[Subject]:
    """The functions of examples/contracts/ under their own contract (``CONTRACT``): each broken
    variant of a module's ``KILLED_BY`` (a dict: function -> checks) a mutant, each of its
    ``CORRECT`` an alternate; named ``module:function``."""
    found = []
    for path in sorted((ROOT / "examples" / "contracts").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        killed_by = _constant(tree, "KILLED_BY")
        if not isinstance(killed_by, dict):
            continue
        contract = f"{path.relative_to(ROOT).as_posix()}:CONTRACT"
        pairs = [("mutants", f, tuple(c)) for f, c in killed_by.items()]
        pairs += [("alternates", f, ()) for f in _constant(tree, "CORRECT") or ()]  # type: ignore[attr-defined]
        for kind, function, checks in pairs:
            found.append(
                Subject(
                    name=f"{path.stem}:{function}",
                    path=path,
                    kind=kind,
                    doc=f"{path.stem}.{function}",
                    killed_by=checks,
                    function=function,
                    contract=contract,
                )
            )
    return found


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
                devices=devices if isinstance(devices := _constant(tree, "DEVICES"), int) else None,
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
    def missed(self) -> list[str]:
        """For a mutant: the checks of its KILLED_BY that did not fail or crash in this run."""
        return [c for c in self.subject.killed_by if self.statuses.get(c) not in BROKEN]

    @property
    def schedule_seed(self) -> int | None:
        """The covering schedule's seed the run drew (None without a report)."""
        return self.report["run"].get("schedule_seed") if self.report is not None else None

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
    if subject.contract is not None:
        cmd += ["--contract", subject.contract]
    for check_id in checks:
        cmd += ["--check", check_id]
    if subject.call_timeout is not None:
        cmd += ["--call-timeout", f"{subject.call_timeout:g}"]
    if subject.devices is not None:
        cmd += ["--devices", str(subject.devices)]
    if report is not None:
        cmd += [REPORT_OPTION, str(report)]
    if in_process:
        cmd += ["-n", "0"]
    if seed is not None:
        cmd += [f"--hypothesis-seed={seed}"]
    return cmd


def _environment(storage: Path | None = None) -> dict[str, str]:
    """The child's environment (Hypothesis would pick its own CI settings; the profile is chosen
    explicitly), with ``storage`` as its Hypothesis directory: an empty example database, so that
    no run replays what an earlier run saved under the same check."""
    env = child_env()
    if storage is not None:
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(storage)
    return env


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
                storage = Path(tmp) / "hypothesis"
                os.makedirs(storage)
                done = subprocess.run(
                    argv,
                    cwd=ROOT,
                    env=_environment(storage),
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
        seconds = time.perf_counter() - start
        return Run(subject, profile, returncode, output, seconds, read_report(report))


# ---------------------------------------------------------------------------
# The ledger: runs kept across sittings

KIT_FILES = ("conftest.py", "pyproject.toml", "tests/hypothesis_fast_fail.py", "tests/kit_process.py")
VERSIONED = ("jax", "jaxlib", "hypothesis", "pytest")


def kit_digest() -> str:
    """What a run's verdict depends on besides the subject: the kit's files and the versions."""
    h = hashlib.sha256()
    kit = (ROOT / "conformance").rglob("*")
    paths = sorted(p for p in kit if p.is_file() and "__pycache__" not in p.parts)
    for path in [*paths, *(ROOT / f for f in KIT_FILES)]:
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(sys.version.encode())
    for dist in VERSIONED:
        h.update(f"{dist}=={importlib.metadata.version(dist)}".encode())
    return h.hexdigest()[:16]


def subject_digest(subject: Subject) -> str:
    return hashlib.sha256(subject.path.read_bytes()).hexdigest()[:16]


class Ledger:
    """Runs appended to a JSON-lines file as they end, and read back by subject, profile and digest."""

    def __init__(self, path: Path, kit: str) -> None:
        self.path = path
        self.kit = kit
        self._lock = threading.Lock()

    def _key(self, subject: Subject, profile: str) -> tuple[str, str, str, str]:
        return (subject.name, profile, self.kit, subject_digest(subject))

    def runs(self, subjects: list[Subject], profile: str) -> dict[Subject, list[Run]]:
        """The runs the file holds for ``subjects`` at this kit's digest."""
        wanted = {self._key(s, profile): s for s in subjects}
        found: dict[Subject, list[Run]] = {s: [] for s in subjects}
        if not self.path.exists():
            return found
        for line in self.path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            subject = wanted.get((record["subject"], record["profile"], record["kit"], record["source"]))
            if subject is not None:
                found[subject].append(_from_record(subject, record))
        return found

    def add(self, run: Run) -> None:
        subject = run.subject
        record = {
            "subject": subject.name,
            "kind": subject.kind,
            "profile": run.profile,
            "kit": self.kit,
            "source": subject_digest(subject),
            "returncode": run.returncode,
            "seconds": round(run.seconds, 2),
            "schedule_seed": run.schedule_seed,
            "verdict": run.verdict,
            "checks": (
                None
                if run.report is None
                else [[c["id"], c["status"], c["examples"]] for c in run.report["checks"]]
            ),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if not run.killed if subject.kind == "mutants" else run.false_failure:
            record["output_tail"] = "\n".join(run.output.strip().splitlines()[-40:])
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())


def _from_record(subject: Subject, record: dict[str, Any]) -> Run:
    report = None
    if record["checks"] is not None:
        report = {
            "run": {"schedule_seed": record["schedule_seed"]},
            "verdict": {"status": record["verdict"]},
            "checks": [{"id": c, "status": s, "examples": e, "message": ""} for c, s, e in record["checks"]],
        }
    output = record.get("output_tail", "[kept in the ledger: the output's tail only for failures]")
    return Run(subject, record["profile"], record["returncode"], output, record["seconds"], report)


# ---------------------------------------------------------------------------
# The table


def _line(run: Run, label: str = "") -> str:
    subject = run.subject
    failed = run.failed
    missed = ""
    if subject.kind == "mutants":
        verdict = "killed" if run.killed else "SURVIVED"
        if run.killed and run.missed:
            verdict = "killed*"  # killed, but some check of its KILLED_BY did not fail
            missed = f"  (KILLED_BY missed: {', '.join(run.missed)})"
    else:
        verdict = "FAILED" if run.false_failure else "ok"
    first = failed[0] if failed else None
    examples = str(run.examples[first]) if first in run.examples else "-"
    checks = ", ".join(failed) if failed else "-"
    seed = "-" if run.schedule_seed is None else str(run.schedule_seed)
    name = subject.name + label
    return f"{name:<36} {verdict:<9} {examples:>8} {run.seconds:6.1f}s {seed:>10}  {checks}{missed}"


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)"


def _rates(subject: Subject, runs: list[Run]) -> str:
    """One subject's line over its runs: a mutant's kill rate and each KILLED_BY check's, or an
    alternate's false failures."""
    n = len(runs)
    seconds = sum(r.seconds for r in runs) / n
    if subject.kind == "mutants":
        per_check = ", ".join(
            f"{c} {sum(r.statuses.get(c) in BROKEN for r in runs)}/{n}" for c in subject.killed_by
        )
        others = Counter(c for r in runs for c in r.failed if c not in subject.killed_by)
        also = f"; also failed: {', '.join(f'{c} {k}/{n}' for c, k in others.items())}" if others else ""
        said = f"killed {_rate(sum(r.killed for r in runs), n)}"
        return f"{subject.name:<36} {said:<20} {seconds:6.1f}s  KILLED_BY: {per_check}{also}"
    failed = Counter(c for r in runs for c in r.failed)
    which = ", ".join(f"{c} {k}/{n}" for c, k in failed.items()) or "-"
    said = f"false failures {sum(r.false_failure for r in runs)}/{n}"
    return f"{subject.name:<36} {said:<20} {seconds:6.1f}s  failed: {which}"


def _explain(run: Run) -> str:
    tail = "\n".join(run.output.strip().splitlines()[-40:])
    return f"--- {run.subject.kind}/{run.subject.name} (exit {run.returncode}) ---\n{tail}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=PROFILES, default="default")
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        metavar="N",
        help="fresh unseeded runs per mutant and alternate (default 1); prints kill and false-failure rates",
    )
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
    parser.add_argument(
        "--ledger",
        type=Path,
        metavar="FILE",
        help="append every run to FILE (JSON lines) and count the runs it already holds "
        "for the same kit, subject and profile toward --runs",
    )
    parser.add_argument(
        "--from-ledger",
        action="store_true",
        help="run nothing: print the table from --ledger's runs (the first --runs of each)",
    )
    parser.add_argument(
        "--contract",
        default=None,
        help="judge tests/mutants and tests/alternates under this --contract (a user's declaration of "
        "pjit_double's, e.g. examples/contracts/pjit_double.py:CONTRACT) instead of the built-in one",
    )
    parser.add_argument("names", nargs="*", help="only these mutants/alternates (default: all)")
    args = parser.parse_args(argv)
    if args.from_ledger and args.ledger is None:
        parser.error("--from-ledger needs --ledger FILE")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.runs > 1 and args.profile == "ci":
        parser.error(
            "the ci profile is derandomized: every run draws the same; --runs needs default or thorough"
        )

    subjects = discover("mutants") + discover("alternates")
    if args.contract is None:
        subjects += discover_examples()
    names = [*args.names, *args.only]
    if names:
        subjects = [s for s in subjects if s.name in names]
        missing = set(names) - {s.name for s in subjects}
        if missing:
            parser.error(f"no mutant or alternate called {', '.join(sorted(missing))}")
    if args.contract is not None:  # each its own subject (and ledger entry): name@contract
        subjects = [
            dataclasses.replace(s, name=f"{s.name}@{args.contract}", contract=args.contract) for s in subjects
        ]
    n = args.runs
    ledger = Ledger(args.ledger, kit_digest()) if args.ledger is not None else None
    kept = ledger.runs(subjects, args.profile) if ledger is not None else {s: [] for s in subjects}
    runs: dict[Subject, list[Run]] = {s: kept[s][:n] for s in subjects}
    todo = [(s, i) for i in range(n) for s in subjects if i >= len(runs[s])]
    if args.from_ledger:
        todo = []
    have = sum(len(r) for r in runs.values())
    print(
        f"profile {args.profile}: {len(subjects) * n} runs of the full suite ({n} per module, fresh draws), "
        + (f"{have} kept in {args.ledger} (kit {ledger.kit}), " if ledger is not None else "")
        + f"{len(todo)} to run, {args.jobs} at a time",
        flush=True,
    )
    print(
        f"{'name':<36} {'verdict':<9} {'examples':>8} {'time':>7} {'schedule':>10}  failed checks", flush=True
    )
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        fast_fail = False if args.shrink else None
        futures = {pool.submit(run_conformance, s, args.profile, (), fast_fail): (s, i) for s, i in todo}
        for future in concurrent.futures.as_completed(futures):
            run = future.result()
            runs[run.subject].append(run)
            if ledger is not None:
                ledger.add(run)
            print(_line(run, f" #{futures[future][1] + 1}" if n > 1 else ""), flush=True)
    short = {s.name: len(r) for s, r in runs.items() if len(r) < n}
    if short:
        # only with --from-ledger: the rates below are over the runs each subject has
        print(f"fewer than {n} runs kept for: {', '.join(f'{k} ({v})' for k, v in sorted(short.items()))}")
        runs = {s: r for s, r in runs.items() if r}
        subjects = [s for s in subjects if s in runs]

    mutants = {s: r for s, r in runs.items() if s.kind == "mutants"}
    alternates = {s: r for s, r in runs.items() if s.kind == "alternates"}
    survivors = [s for s, r in mutants.items() if not all(run.killed for run in r)]
    unverified = {
        (s.name, c): (sum(run.statuses.get(c) not in BROKEN for run in r), len(r))
        for s, r in mutants.items()
        for c in s.killed_by
        if any(run.statuses.get(c) not in BROKEN for run in r)
    }
    false_failures = [s for s, r in alternates.items() if any(run.false_failure for run in r)]
    print()
    if n > 1:
        print(f"over {n} fresh runs each ({args.profile} profile, no --hypothesis-seed):")
        for subject in subjects:
            print(_rates(subject, runs[subject]))
        seeds = {run.schedule_seed for r in runs.values() for run in r} - {None}
        print(f"schedule seeds: {len(seeds)} distinct in {sum(len(r) for r in runs.values())} runs")
        print()
    if survivors:
        print(f"survivors (in some run): {', '.join(sorted(s.name for s in survivors))}")
    if unverified:
        print(
            "KILLED_BY checks that did not fail (runs missed): "
            + ", ".join(f"{name}: {check} ({k}/{m})" for (name, check), (k, m) in sorted(unverified.items()))
        )
    if false_failures:
        print(f"failing alternates (in some run): {', '.join(sorted(s.name for s in false_failures))}")
    if args.verbose:
        for subject in survivors + false_failures:
            for run in runs[subject]:
                if (subject.kind == "mutants" and not run.killed) or (
                    subject.kind == "alternates" and run.false_failure
                ):
                    print(_explain(run))
    claims = sum(len(s.killed_by) for s in mutants)
    over = " in every run kept" if short else f" in all {n} runs" if n > 1 else ""
    print(f"killed {len(mutants) - len(survivors)} / {len(mutants)}{over}")
    print(f"KILLED_BY claims verified: {claims - len(unverified)} / {claims}")
    print(f"false failures on alternates: {len(false_failures)} / {len(alternates)}")
    print(f"profile {args.profile}, {time.perf_counter() - start:.0f} s wall")
    return 0 if not survivors and not false_failures and not unverified else 1


if __name__ == "__main__":
    sys.exit(main())
