"""The report: per-check verdicts, the Markdown table and the JSON document.

Verdicts are collected from pytest's test reports (so results from
pytest-xdist workers arrive here too), each carrying the kit's record of the
check as a user property.  The JSON layout is described by
``report-schema.json`` beside this file; ``SCHEMA_VERSION`` changes whenever
that layout changes incompatibly.
"""

from __future__ import annotations

import json
import platform
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import conformance
from conformance._src.calling.devices import DEFAULT_DEVICES
from conformance._src.inputs import coverage
from conformance._src.verdict import BROKEN, REACHED, CheckVerdict, RunVerdict, Status, run_verdict

SCHEMA_VERSION = 1
STATUSES = tuple(status.value for status in Status)


@dataclass
class Report:
    """Everything the run learned, in the order the checks are registered.

    ``expected`` lists every check of the run's contract: the run is
    CONFORMING only when each of them reached a verdict (verdict.py).
    """

    spec: str
    impl_version: str | None
    contract: str
    profile: str
    seed: str | None
    devices: int
    expected: list[str] = field(default_factory=list)
    xfails: dict[str, str] = field(default_factory=dict)  # --xfail-file: check ID -> reason
    backend: str | None = None
    device_kind: str | None = None
    process_count: int = 1
    process_index: int = 0  # the process that wrote this report
    supervised: bool = False
    results: dict[str, CheckVerdict] = field(default_factory=dict)
    duration: float = 0.0
    schedule_seed: int = 0  # the covering schedule's (schedule.Schedule)

    def add(self, result: CheckVerdict) -> None:
        self.results[result.id] = result

    def started(self, check_id: str) -> None:
        """A check began: until its verdict arrives it is ``partial``."""
        self.results.setdefault(check_id, CheckVerdict(check_id, status=Status.PARTIAL))

    def ordered(self) -> list[CheckVerdict]:
        """Every expected check (``not run`` where none came), then any other, in registry order."""
        from conformance._src.contract.catalogue import CHECKS

        every = dict.fromkeys(self.expected)
        every.update(dict.fromkeys(self.results))
        order = {check_id: i for i, check_id in enumerate(CHECKS)}
        ids = sorted(every, key=lambda c: order.get(c, len(order)))
        return [
            self.results.get(c)
            or CheckVerdict(
                c, status=Status.NOT_RUN, message="not run: the run ended before it, or --check left it out"
            )
            for c in ids
        ]

    @property
    def verdict(self) -> RunVerdict:
        return run_verdict(list(self.results.values()), self.expected)

    @property
    def conforming(self) -> bool:
        return self.verdict is RunVerdict.CONFORMING

    def counts(self) -> dict[str, int]:
        every = self.ordered()
        return {s.value: sum(r.status is s for r in every) for s in Status}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def to_json(report: Report) -> dict[str, Any]:
    import jax

    from conformance._src.contract.catalogue import CHECKS

    every = report.ordered()
    totals = {
        k: sum(getattr(r, k) for r in every)
        for k in ("examples", "reused", "calls", "compiles", "seconds_in_impl")
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "kit": {"name": "pjit-double-conformance", "version": conformance.__version__},
        "implementation": {"spec": report.spec, "version": report.impl_version},
        "environment": {
            "python": platform.python_version(),
            "jax": jax.__version__,
            "jaxlib": _version("jaxlib"),
            "numpy": _version("numpy"),
            "hypothesis": _version("hypothesis"),
            "pytest": _version("pytest"),
            "ml_dtypes": _version("ml_dtypes"),
            "platform": platform.platform(),
            "device_count": report.devices,
            "backend": report.backend,
            "device_kind": report.device_kind,
            "process_count": report.process_count,
            "supervised": report.supervised,
        },
        "run": {
            "contract": report.contract,
            "hypothesis_profile": report.profile,
            "hypothesis_seed": report.seed,
            "schedule_seed": report.schedule_seed,
            "duration_s": round(report.duration, 3),
        },
        "verdict": {
            "status": report.verdict.value,
            "conforming": report.conforming,
            "counts": report.counts(),
            "xfails": dict(report.xfails),
            "left_out": {r.id: list(r.left_out) for r in every if r.left_out},
        },
        "timing": {**totals, "seconds_in_impl": round(totals["seconds_in_impl"], 3)},
        "checks": [
            {
                "id": r.id,
                "title": CHECKS[r.id].title if r.id in CHECKS else "",
                "contracts": _contracts_of(CHECKS[r.id]) if r.id in CHECKS else [],
                "status": r.status.value,
                "message": r.message,
                "counterexample": r.counterexample,
                "examples": r.examples,
                "reused": r.reused,
                "seconds": round(r.seconds, 3),
                "calls": r.calls,
                "compiles": r.compiles,
                "xfail_reason": r.xfail_reason,
                "coverage": {
                    "cells": r.cells,
                    "scheduled": r.scheduled,
                    "inputs": dict(sorted(r.coverage.items())),
                    "unvisited": list(r.unvisited),
                    "not_judged": list(r.not_judged),
                    "known_bugs": dict(r.known_bugs),
                    "mesh_classes": dict(sorted(r.mesh_classes.items())),
                    "pairs": {k: list(v) for k, v in sorted(r.pairs.items())},
                },
                "histories": dict(r.histories),
                "octaves": dict(r.octaves),
                "tiers": dict(r.tiers),
                "arrived": dict(r.arrived),
                "left_out": list(r.left_out),
                "where": dict(r.where),
            }
            for r in every
        ],
    }


def headline(report: Report) -> str:
    """The verdict in one line: what a CI log shows first."""
    verdict = report.verdict
    every = report.ordered()
    reached = sum(r.status in REACHED for r in every)
    text = verdict.headline
    if verdict is RunVerdict.CONFORMING and report.xfails:
        listed = sum(r.status is Status.XFAILED for r in every)
        text += f", with {listed} expected failure(s) listed in --xfail-file"
    elif verdict is RunVerdict.PARTIAL and reached < len(every):
        text += f": {reached} of {len(every)} checks reached a verdict; this run does not show conformance"
    elif verdict is RunVerdict.PARTIAL:
        text += (
            f": the whole contract was not judged -- {left_out_summary(report)}; "
            f"this run does not show conformance"
        )
    elif verdict is RunVerdict.KIT_ERROR:
        errors = [r.id for r in every if r.status is Status.KIT_ERROR]
        text += (
            f": the kit could not judge {len(errors)} check(s) ({', '.join(errors)}), each for the "
            f"reason its message gives; this run does not show conformance"
        )
    elif verdict is RunVerdict.NOT_CONFORMING:
        broken = [r.id for r in every if r.status in BROKEN]
        text += f": {len(broken)} check(s) failed or crashed ({', '.join(broken)})"
    return text


def left_out_summary(report: Report) -> str:
    """What the run left out, in a few words per reason (each check's ``left_out`` has it whole)."""
    devices, meshes, inconclusive, cells = [], [], [], []
    for r in report.ordered():
        for line in r.left_out:
            if line.startswith("needs "):
                devices.append(r.id)
            elif line.startswith("inputs on "):
                meshes.append(r.id)
            elif line.startswith("inconclusive"):
                inconclusive.append(r.id)
            else:
                cells.append(r.id)
    parts = []
    if devices:
        parts.append(f"{len(devices)} check(s) need more devices than the {report.devices} there are")
    if meshes:
        parts.append(f"{len(meshes)} check(s) lack the meshes {report.devices} device(s) cannot make")
    if inconclusive:
        parts.append(f"inconclusive: {', '.join(inconclusive)}")
    if cells:
        parts.append(f"cells with no judged input: {', '.join(cells)}")
    if devices or meshes:
        asked = [
            int(n) for r in report.ordered() for n in re.findall(r"--devices (\d+)\)", " ".join(r.left_out))
        ]
        parts.append(f"a forced-CPU run with --devices {max([DEFAULT_DEVICES, *asked])} judges them")
    return "; ".join(parts)


def left_out_lines(report: Report) -> list[str]:
    """Markdown: each check's left-out part of its domain, and why (the run is then PARTIAL)."""
    rows = [f"- `{r.id}`: {line}" for r in report.ordered() for line in r.left_out]
    if not rows:
        return []
    return ["Left out of this run (so it is PARTIAL, exit 2, not CONFORMING):", *rows, ""]


def markdown(report: Report, *, blocks: bool = True) -> str:
    """The report in Markdown: headline, environment, what was left out, the table, each failure's
    block (``blocks``: the terminal leaves them out, where pytest printed each one already) and
    the coverage table."""
    lines = [
        f"**{title(report)}: {headline(report)}** -- `{report.spec}`, contract `{report.contract}`, "
        f"profile `{report.profile}`, {report.devices} devices",
        "",
        f"Environment: {environment_line(report)}",
        "",
    ]
    lines += left_out_lines(report)
    if report.xfails:
        lines.append("Expected failures (--xfail-file):")
        lines += [f"- `{check_id}`: {reason}" for check_id, reason in report.xfails.items()]
        lines.append("")
    lines += [
        "| check | status | examples | reused | calls | compiles | time |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report.ordered():
        counts = f"{r.examples} | {r.reused} | {r.calls} | {r.compiles}"
        lines.append(f"| `{r.id}` | {r.status.value} | {counts} | {r.seconds:.2f} s |")
    failures = failure_blocks(report) if blocks else []
    return "\n".join(lines + ["", *where_table(report), *failures, *coverage_table(report)]) + "\n"


def where_table(report: Report) -> list[str]:
    """Markdown: in an accelerator run (calling/chips.py), each check's status on the forced CPU
    devices and on the chips; nothing in other runs."""
    chips = next((r for r in report.ordered() if r.where), None)
    if chips is None:
        return []
    lines = [
        f"Where each check ran: forced CPU devices ({report.devices}, this run) and the chips "
        f"(`platform.chips`, its own process):",
        "",
        "| check | forced CPU | chips |",
        "|---|---|---|",
    ]
    here = {r.id: r for r in report.ordered()}
    for check_id in dict.fromkeys([*here, *chips.where]):
        cpu = here[check_id].status.value if check_id in here else "-"
        if check_id == chips.id:
            cpu = "waited for the chips' part"
        lines.append(f"| `{check_id}` | {cpu} | {chips.where.get(check_id, '-')} |")
    return [*lines, ""]


def failure_blocks(report: Report) -> list[str]:
    """Markdown: each failed or crashed check's block (summary, input, expected, got, hint, rerun), as
    the terminal shows it: a CI job summary made of this file is enough to act on."""
    lines: list[str] = []
    for r in report.ordered():
        if r.status in BROKEN and r.message:
            lines += [f"Failure of `{r.id}`:", "", "```", *r.message.splitlines(), "```", ""]
    return lines


def write_usage_error(message: str, path: str) -> None:
    """A run that stopped at a usage error still leaves a one-line summary at a ``.md`` report path
    (the JSON report is only written by a run that judged something)."""
    target = Path(path)
    if target.suffix != ".md":
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"**pjit_double conformance: USAGE ERROR (exit 4)** -- {message}\n")
    except OSError:
        pass  # the path itself may be what the usage error is about


def environment_line(report: Report) -> str:
    """Where the run ran, in one line: backend, device kind, processes and the versions that matter."""
    import jax

    processes = f"{report.process_count} process" + ("es" if report.process_count != 1 else "")
    versions = ", ".join(
        f"{name} {found}"
        for name, found in (
            ("jax", jax.__version__),
            ("jaxlib", _version("jaxlib")),
            ("hypothesis", _version("hypothesis")),
            ("pytest", _version("pytest")),
            ("numpy", _version("numpy")),
        )
    )
    return (
        f"backend {report.backend or '?'} ({report.device_kind or '?'}), {processes}, "
        f"{versions}, Python {platform.python_version()}"
    )


_AXES = ("dtype", "placement", "mesh", "length")


def coverage_table(report: Report) -> list[str]:
    """Markdown: per check, the cells of dtype x placement x mesh x length it judged, and the
    inputs per value of each axis; then every cell a check left unvisited."""
    rows = [r for r in report.ordered() if r.cells or r.coverage]
    if not rows:
        return []
    lines = [
        f"Coverage (dtype x placement x mesh x length; schedule seed {report.schedule_seed}):",
        "",
        "| check | cells judged | inputs | per dtype | per placement | per mesh | per length |",
        "|---|---:|---:|---|---|---|---|",
    ]
    unvisited: list[str] = []
    for r in rows:
        marginals = []
        for axis in range(len(_AXES)):
            counts: dict[str, int] = {}
            for cell, count in r.coverage.items():
                value = cell.split(" / ")[axis]
                counts[value] = counts.get(value, 0) + count
            marginals.append(" ".join(f"{k}:{v}" for k, v in sorted(counts.items())))
        judged = f"{r.cells - len(r.unvisited) - len(r.not_judged)} of {r.cells}" if r.cells else "-"
        lines.append(f"| `{r.id}` | {judged} | {sum(r.coverage.values())} | " + " | ".join(marginals) + " |")
        unvisited += [f"- `{r.id}`: {cell}" for cell in r.unvisited]
    lines += _mesh_classes(rows) + _histories(report)
    if unvisited:
        lines += ["", f"Cells left unvisited ({len(unvisited)}):", *unvisited[:50]]
        if len(unvisited) > 50:
            lines.append(f"- ... and {len(unvisited) - 50} more (the JSON report lists them all)")
    elif any(r.left_out for r in report.ordered()):
        lines += ["", f"Every cell {report.devices} device(s) can make was visited; the rest was left out."]
    elif any(r.not_judged for r in rows):
        lines += ["", "Every other cell of every check's domain was visited (not judged: below)."]
    elif any(r.cells for r in rows):
        lines += ["", "Every cell of every check's domain was visited."]
    return lines + known_bugs(report)


def _mesh_classes(rows: list[CheckVerdict]) -> list[str]:
    """Markdown: per check, the inputs per mesh class value, and the pairs of axis values covered."""
    shown = [r for r in rows if r.mesh_classes]
    if not shown:
        return []
    lines = [
        "",
        "Mesh classes (the data axis's size, the devices' order, the data axis's position), and the "
        "pairs of values, one of a mesh class's axis, that the check judged of those its domain has:",
        "",
        "| check | inputs per mesh class | pairs covered |",
        "|---|---|---|",
    ]
    for r in shown:
        by_axis: dict[str, list[str]] = {}
        for key, count in sorted(r.mesh_classes.items()):
            axis, value = key.split(": ", 1)
            by_axis.setdefault(axis, []).append(f"{value}:{count}")
        classes = "; ".join(f"{axis}: {' '.join(values)}" for axis, values in by_axis.items())
        covered = sum(c for c, _ in r.pairs.values())
        possible = sum(p for _, p in r.pairs.values())
        short = [f"{k} {c}/{p}" for k, (c, p) in sorted(r.pairs.items()) if c < p]
        detail = f"{covered} of {possible}" + (
            f" (short: {'; '.join(short[:6])})" if short else ", every one"
        )
        lines.append(f"| `{r.id}` | {classes} | {detail if possible else '-'} |")
    return lines


def _histories(report: Report) -> list[str]:
    """Markdown: what the search of histories of calls reached (history.py)."""
    lines = []
    for r in report.ordered():
        if r.histories:
            reached = ", ".join(f"{k} {v}" for k, v in r.histories.items())
            lines += ["", f"Histories of calls (`{r.id}`): {reached}."]
    arrived: dict[str, int] = {}
    for r in report.ordered():
        for kind, count in r.arrived.items():
            arrived[kind] = arrived.get(kind, 0) + count
    if arrived:
        where = f"process {report.process_index}" if report.process_count > 1 else "this run"
        counts = ", ".join(f"{kind} {arrived.get(kind, 0)}" for kind in coverage.PLACEMENTS)
        lines += [
            "",
            f"Placements of x that reached the implementation ({where}, read from x itself): {counts}.",
        ]
    octaves = [r for r in report.ordered() if r.octaves]
    if octaves:
        judged = "; ".join(f"`{r.id}` {len(r.octaves)} of 16" for r in octaves)
        lines += ["", f"Lengths by octave, between 2^4 and 2^20 (octaves judged): {judged}."]
    tiered = [r for r in report.ordered() if r.tiers]
    if tiered:
        judged = "; ".join(_tiers_judged(r) for r in tiered)
        lines += [
            "",
            "Long lengths by tier (next to 4096, 8192, 65536 elements, 1 MiB; past 32 MiB), the (tier, "
            f"dtype) pairs judged: {judged}.",
        ]
    return lines


def _tiers_judged(r: CheckVerdict) -> str:
    """``r``'s (tier, dtype) pairs judged, and whether they are every pair of the tiers and dtypes it
    judged (a check of one mesh kind meets a dtype in the tiers of that kind's groups only)."""
    pairs = {tuple(k.split(": ", 1)) for k in r.tiers}
    tiers, dtypes = {p[0] for p in pairs}, {p[1] for p in pairs}
    every = ", every pair" if len(pairs) == len(tiers) * len(dtypes) else ""
    return f"`{r.id}` {len(pairs)} ({len(tiers)} tiers x {len(dtypes)} dtypes{every})"


def known_bugs(report: Report) -> list[str]:
    """Markdown: the inputs a known bug of the installed JAX kept from being judged (jax_bugs.py)."""
    per_bug: dict[str, list[str]] = {}
    for r in report.ordered():
        for bug, count in r.known_bugs.items():
            cells = f"; no input judged in {len(r.not_judged)} cell(s)" if r.not_judged else ""
            per_bug.setdefault(bug, []).append(f"- `{r.id}`: {count} input(s) not judged{cells}")
    lines: list[str] = []
    for bug, rows in per_bug.items():
        what = "limit" if "(a limit of JAX " in bug else "bug"
        lines += ["", f"Not judged, for JAX's own {what} -- {bug}:", *rows]
    return lines


def timing_summary(report: Report) -> str:
    results = report.ordered()
    in_impl = sum(r.seconds_in_impl for r in results)
    in_checks = sum(r.seconds for r in results)
    return (
        f"{sum(r.examples for r in results)} examples ({sum(r.reused for r in results)} drawn from earlier "
        f"checks'), {sum(r.calls for r in results)} implementation "
        f"calls, {sum(r.compiles for r in results)} backend compiles; {in_impl:.1f} s in the "
        f"implementation, {max(0.0, in_checks - in_impl):.1f} s in the kit, {report.duration:.1f} s wall"
    )


def write(report: Report, path: str) -> list[Path]:
    """Write JSON at ``path``; for a ``.md`` path, Markdown there and JSON beside it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    written = []
    if target.suffix == ".md":
        target.write_text(markdown(report))
        written.append(target)
        target = target.with_suffix(".json")
    target.write_text(json.dumps(to_json(report), indent=2) + "\n")
    written.append(target)
    return written


def print_checks(stream: Any = sys.stdout) -> None:
    """``--list-checks``: one line per check with its contracts."""
    from conformance._src.contract.catalogue import CHECKS

    width = max(len(c) for c in CHECKS)
    for check in CHECKS.values():
        contracts = (
            "accel run"  # any contract, in an accelerator run (calling/chips.py)
            if check.part
            else "declared"
            if check.declared
            else "seed+full"
            if not check.needs_mesh
            else "full only"
        )
        print(f"{check.id:<{width}}  {contracts:<9}  {check.title}", file=stream)


def title(report: Report) -> str:
    """What the run judged: pjit_double's contract (seed, full), or a declared contract."""
    if report.contract in ("seed", "full"):
        return "pjit_double conformance"
    return "conformance to a declared contract"


def _contracts_of(check: Any) -> list[str]:
    if check.part:  # an accelerator run's: any contract
        return ["seed", "full", "declared"]
    return ["declared"] if check.declared else check.contract_names
