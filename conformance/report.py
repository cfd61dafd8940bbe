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
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import conformance

SCHEMA_VERSION = 1
STATUSES = ("passed", "failed", "inconclusive", "xfailed", "not applicable", "not run")


@dataclass
class CheckResult:
    id: str
    status: str
    message: str = ""
    counterexample: str | None = None
    examples: int = 0
    reused: int = 0  # of the examples, those drawn from earlier checks' (see pool.py)
    seconds: float = 0.0
    calls: int = 0
    compiles: int = 0
    seconds_in_impl: float = 0.0


@dataclass
class Report:
    """Everything the run learned, in the order the checks are registered."""

    spec: str
    impl_version: str | None
    contract: str
    profile: str
    seed: str | None
    devices: int
    results: dict[str, CheckResult] = field(default_factory=dict)
    duration: float = 0.0

    def add(self, result: CheckResult) -> None:
        self.results[result.id] = result

    def ordered(self) -> list[CheckResult]:
        from conformance.registry import CHECKS

        order = {check_id: i for i, check_id in enumerate(CHECKS)}
        return sorted(self.results.values(), key=lambda r: order.get(r.id, len(order)))

    @property
    def conforming(self) -> bool:
        return bool(self.results) and not any(r.status == "failed" for r in self.results.values())

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results.values()) for s in STATUSES}


def status_of(outcome: str, skip_reason: str, was_xfail: bool) -> str:
    """Map pytest's outcome of a check's test onto the kit's status names."""
    if was_xfail:
        return "xfailed" if outcome == "skipped" else "failed"  # a strict XPASS fails
    if outcome == "skipped":
        if "inconclusive" in skip_reason:
            return "inconclusive"
        if "not applicable" in skip_reason:
            return "not applicable"
        return "not run"
    return outcome


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def to_json(report: Report) -> dict[str, Any]:
    import jax

    from conformance.registry import CHECKS

    totals = {
        k: sum(getattr(r, k) for r in report.results.values())
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
            "platform": platform.platform(),
            "device_count": report.devices,
        },
        "run": {
            "contract": report.contract,
            "hypothesis_profile": report.profile,
            "hypothesis_seed": report.seed,
            "duration_s": round(report.duration, 3),
        },
        "verdict": {"conforming": report.conforming, "counts": report.counts()},
        "timing": {**totals, "seconds_in_impl": round(totals["seconds_in_impl"], 3)},
        "checks": [
            {
                "id": r.id,
                "title": CHECKS[r.id].title if r.id in CHECKS else "",
                "contracts": sorted(c.value for c in CHECKS[r.id].contracts) if r.id in CHECKS else [],
                "status": r.status,
                "message": r.message,
                "counterexample": r.counterexample,
                "examples": r.examples,
                "reused": r.reused,
                "seconds": round(r.seconds, 3),
                "calls": r.calls,
                "compiles": r.compiles,
            }
            for r in report.ordered()
        ],
    }


def markdown(report: Report) -> str:
    verdict = "CONFORMING" if report.conforming else "NOT CONFORMING"
    lines = [
        f"**pjit_double conformance: {verdict}** -- `{report.spec}`, contract `{report.contract}`, "
        f"profile `{report.profile}`, {report.devices} devices",
        "",
        "| check | status | examples | reused | calls | compiles | time |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report.ordered():
        counts = f"{r.examples} | {r.reused} | {r.calls} | {r.compiles}"
        lines.append(f"| `{r.id}` | {r.status} | {counts} | {r.seconds:.2f} s |")
    return "\n".join(lines) + "\n"


def timing_summary(report: Report) -> str:
    results = report.results.values()
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
    from conformance.registry import CHECKS

    width = max(len(c) for c in CHECKS)
    for check in CHECKS.values():
        contracts = "seed+full" if len(check.contracts) == 2 else "full only"
        print(f"{check.id:<{width}}  {contracts:<9}  {check.title}", file=stream)
