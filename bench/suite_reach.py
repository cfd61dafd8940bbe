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
from pathlib import Path
from typing import Any

RECORD_ENV = "SUITE_REACH_RECORD"  # the folder each process of a run writes what it recorded to
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

    from conformance import kit as kit_module
    from conformance import strategies

    judged: dict[str, set[str]] = defaultdict(set)
    combos: set[str] = set()
    lengths: set[int] = set()
    dtypes: set[str] = set()
    meshes: set[str] = set()
    specials: dict[str, set[int]] = defaultdict(set)
    special_totals: dict[str, int] = {}
    original = kit_module.Kit.call

    # Keys made here, not with conformance.pool.key: older checkouts have no pool.
    # repr() keys compare equal across processes, so the parent can merge them.
    def call(self: Any, case: Any, *args: Any, **kwargs: Any) -> Any:
        mesh = case.mesh
        where = None if mesh is None else (tuple(int(d.id) for d in mesh.devices.flat), mesh.devices.shape)
        digest = hashlib.blake2b(case.values.tobytes(), digest_size=8).hexdigest()
        judged[self.check_id].add(
            repr((str(case.dtype), case.n, digest, where, case.mesh_arg, case.placement))
        )
        combos.add(repr((str(case.dtype), case.n, where)))
        lengths.add(case.n)
        dtypes.add(str(case.dtype))
        meshes.add("default" if mesh is None else "x".join(str(s) for s in mesh.devices.shape))
        parts = case.values.view(f"f{case.dtype.itemsize // 2}") if case.dtype.kind == "c" else case.values
        name = parts.dtype.name
        if name in ("float16", "bfloat16", "float32", "float64"):
            bits = parts.view(f"u{parts.dtype.itemsize}")
            wanted = np.unique(strategies.special_floats(parts.dtype).view(bits.dtype))
            special_totals[name] = len(wanted)
            specials[name].update(int(b) for b in np.intersect1d(bits, wanted))
        return original(self, case, *args, **kwargs)

    def write() -> None:
        if not judged:
            return  # this process called nothing (the controller of a supervised run)
        record = {
            "judged": {k: sorted(v) for k, v in judged.items()},
            "combos": sorted(combos),
            "lengths": sorted(lengths),
            "dtypes": sorted(dtypes),
            "meshes": sorted(meshes),
            "specials": {k: sorted(v) for k, v in specials.items()},
            "special_totals": special_totals,
        }
        path = Path(folder) / f"{os.getpid()}-{uuid.uuid4().hex}.json"
        path.write_text(json.dumps(record))

    kit_module.Kit.call = call  # type: ignore[method-assign]
    config.add_cleanup(write)


# -- in the parent --------------------------------------------------------------------


def _merge(folder: Path) -> dict[str, Any]:
    """One run's records, from all its processes, as the counts the summary needs."""
    judged: dict[str, set[str]] = defaultdict(set)
    combos: set[str] = set()
    lengths: set[int] = set()
    dtypes: set[str] = set()
    meshes: set[str] = set()
    specials: dict[str, set[int]] = defaultdict(set)
    special_totals: dict[str, int] = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        for check_id, keys in record["judged"].items():
            judged[check_id].update(keys)
        combos.update(record["combos"])
        lengths.update(record["lengths"])
        dtypes.update(record["dtypes"])
        meshes.update(record["meshes"])
        for name, found in record["specials"].items():
            specials[name].update(found)
        special_totals.update(record["special_totals"])
    return {
        "per_check": {k: len(v) for k, v in judged.items()},
        "inputs": len(set().union(*judged.values())) if judged else 0,
        "combos": len(combos),
        "lengths": len(lengths),
        "dtypes": sorted(dtypes),
        "meshes": sorted(meshes),
        "specials": {k: [len(v), special_totals[k]] for k, v in specials.items()},
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
