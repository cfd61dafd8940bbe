"""What a run of the suite reaches, and what it costs: run it several times and count.

    python bench/suite_reach.py [--runs 5] [--profile default] [-- extra pytest args]

Runs ``pytest conformance --impl reference:pjit_double`` in fresh processes
(the repository in the current directory is the one measured, so a checkout
of an older commit can be compared with this script) and records every input
each check judged, in whichever process calls the implementation (this
module is loaded into the runs as a pytest plug-in).  Costs are read from
each run's JSON report (``--conformance-report``).  Prints, as medians over
the runs:

* wall time of the whole process, and backend compiles;
* inputs judged per check (distinct length, dtype, values, mesh, placement);
* distinct inputs judged over the whole run, and distinct (length, dtype,
  mesh) combinations: what compile time buys;
* distinct lengths, the dtypes seen, the mesh shapes seen (devices x axes);
* the share of each float dtype's special values (``special_floats``) that
  appear in some input of the run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORD_ENV = "SUITE_REACH_RECORD"  # the folder each process of a run writes what it recorded to


@dataclass
class _Reach:
    """What calls reached: recorded in each process of a run, merged in the parent."""

    judged: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    combos: set[str] = field(default_factory=set)
    lengths: set[int] = field(default_factory=set)
    dtypes: set[str] = field(default_factory=set)
    meshes: set[str] = field(default_factory=set)
    specials: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    special_totals: dict[str, int] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {
            "judged": {k: sorted(v) for k, v in self.judged.items()},
            "combos": sorted(self.combos),
            "lengths": sorted(self.lengths),
            "dtypes": sorted(self.dtypes),
            "meshes": sorted(self.meshes),
            "specials": {k: sorted(v) for k, v in self.specials.items()},
            "special_totals": self.special_totals,
        }

    def merge(self, record: dict[str, Any]) -> None:
        for check_id, keys in record["judged"].items():
            self.judged[check_id].update(keys)
        self.combos.update(record["combos"])
        self.lengths.update(record["lengths"])
        self.dtypes.update(record["dtypes"])
        self.meshes.update(record["meshes"])
        for name, found in record["specials"].items():
            self.specials[name].update(found)
        self.special_totals.update(record["special_totals"])


PLUGIN = Path(__file__).stem  # this module, loaded by the runs as a pytest plug-in (-p suite_reach)


# -- in the runs: the recording plug-in ----------------------------------------------
# Loaded by ``-p suite_reach`` into every process of a run, the one started
# and any pytest-xdist worker the kit runs its checks in (supervision), so
# the inputs are recorded wherever the implementation is called.  Each
# process writes its own file; the parent merges them.


def pytest_configure(config: Any) -> None:
    folder = os.environ.get(RECORD_ENV)
    if not folder:
        return
    import numpy as np

    from conformance import strategies
    from conformance._src.running import kit as kit_module

    reach = _Reach()
    original = kit_module.Kit.call

    # Keys made here, not with conformance.pool.key: older checkouts have no pool.
    # repr() keys compare equal across processes, so the parent can merge them.
    def call(self: Any, case: Any, *args: Any, **kwargs: Any) -> Any:
        mesh = case.mesh
        where = None if mesh is None else (tuple(int(d.id) for d in mesh.devices.flat), mesh.devices.shape)
        digest = hashlib.blake2b(case.values.tobytes(), digest_size=8).hexdigest()
        reach.judged[self.check_id].add(
            repr((str(case.dtype), case.n, digest, where, case.mesh_arg, case.placement))
        )
        reach.combos.add(repr((str(case.dtype), case.n, where)))
        reach.lengths.add(case.n)
        reach.dtypes.add(str(case.dtype))
        reach.meshes.add("default" if mesh is None else "x".join(str(s) for s in mesh.devices.shape))
        parts = case.values.view(f"f{case.dtype.itemsize // 2}") if case.dtype.kind == "c" else case.values
        name = parts.dtype.name
        if name in ("float16", "bfloat16", "float32", "float64"):
            bits = parts.view(f"u{parts.dtype.itemsize}")
            wanted = np.unique(strategies.special_floats(parts.dtype).view(bits.dtype))
            reach.special_totals[name] = len(wanted)
            reach.specials[name].update(int(b) for b in np.intersect1d(bits, wanted))
        return original(self, case, *args, **kwargs)

    def write() -> None:
        if not reach.judged:
            return  # this process called nothing (the controller of a supervised run)
        path = Path(folder) / f"{os.getpid()}-{uuid.uuid4().hex}.json"
        path.write_text(json.dumps(reach.to_record()))

    kit_module.Kit.call = call  # type: ignore[method-assign]
    config.add_cleanup(write)


# -- in the parent --------------------------------------------------------------------


def _merge(folder: Path) -> dict[str, Any]:
    """One run's records, from all its processes, as the counts the summary needs."""
    reach = _Reach()
    for path in sorted(folder.glob("*.json")):
        reach.merge(json.loads(path.read_text()))
    return {
        "per_check": {k: len(v) for k, v in reach.judged.items()},
        "inputs": len(set().union(*reach.judged.values())) if reach.judged else 0,
        "combos": len(reach.combos),
        "lengths": len(reach.lengths),
        "dtypes": sorted(reach.dtypes),
        "meshes": sorted(reach.meshes),
        "specials": {k: [len(v), reach.special_totals[k]] for k, v in reach.specials.items()},
    }


def _timing_line(report: dict[str, Any]) -> str:
    """The run's ``timing:`` line, from its JSON report (as conformance.report.timing_summary prints it)."""
    timing, checks = report["timing"], report["checks"]
    in_impl = timing["seconds_in_impl"]
    in_checks = sum(c["seconds"] for c in checks)
    reused = timing.get("reused", sum(c.get("reused", 0) for c in checks))
    return (
        f"timing: {timing['examples']} examples ({reused} drawn from earlier checks'), "
        f"{timing['calls']} implementation calls, {timing['compiles']} backend compiles; "
        f"{in_impl:.1f} s in the implementation, {max(0.0, in_checks - in_impl):.1f} s in the kit, "
        f"{report['run']['duration_s']:.1f} s wall"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", default="default")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    base = ["conformance", "--impl", "reference:pjit_double", "-q", "-p", "no:cacheprovider"]
    base += ["--hypothesis-profile", args.profile, "-p", PLUGIN, *args.pytest_args]
    # The checkout in the current directory is measured; this script's folder provides the plug-in.
    path = os.pathsep.join(
        [os.getcwd(), str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")]
    )
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            folder = Path(tmp) / f"run{i}"
            folder.mkdir()
            report_path = Path(tmp) / f"run{i}-report.json"
            env = {**os.environ, RECORD_ENV: str(folder), "PYTHONPATH": path.rstrip(os.pathsep)}
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", *base, "--conformance-report", str(report_path)],
                capture_output=True,
                text=True,
                env=env,
            )
            wall = time.perf_counter() - start
            if proc.returncode != 0 or not report_path.is_file():
                sys.exit(f"run {i} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
            report = json.loads(report_path.read_text())
            run = _merge(folder)
            if not run["per_check"]:
                sys.exit(f"run {i} recorded no calls:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
            line = _timing_line(report)
            run["wall"] = wall
            run["compiles"] = report["timing"]["compiles"]
            runs.append(run)
            print(f"run {i}: {wall:.1f} s, {line}", flush=True)

    def med(values: list[float]) -> float:
        return statistics.median(values)

    print(f"\nmedians over {len(runs)} runs of the {args.profile} profile, {os.getcwd()}")
    print(f"  wall (whole process)         {med([r['wall'] for r in runs]):7.1f} s")
    print(f"  backend compiles             {med([r['compiles'] for r in runs]):7.0f}")
    checks = sorted({c for r in runs for c in r["per_check"]})
    per_check = [med([r["per_check"].get(c, 0) for r in runs]) for c in checks]
    mean = statistics.mean(per_check)
    print(f"  inputs judged per check      {mean:7.1f} (mean over {len(checks)} checks)")
    print(f"  distinct inputs judged       {med([r['inputs'] for r in runs]):7.0f}")
    print(f"  (length, dtype, mesh) combos {med([r['combos'] for r in runs]):7.0f}")
    print(f"  distinct lengths             {med([r['lengths'] for r in runs]):7.0f}")
    print(f"  dtypes seen                  {med([len(r['dtypes']) for r in runs]):7.0f}")
    print(f"  mesh shapes seen             {med([len(r['meshes']) for r in runs]):7.0f}")
    for name in ("float16", "bfloat16", "float32", "float64"):
        shares = [r["specials"][name][0] / r["specials"][name][1] for r in runs if name in r["specials"]]
        if shares:
            print(f"  {name} specials present    {100 * med(shares):6.0f} %")
    print("  per check: " + ", ".join(f"{c} {v:g}" for c, v in zip(checks, per_check, strict=True)))


if __name__ == "__main__":
    main()
