"""What a run of the suite reaches, and what it costs: run it several times and count.

    python bench/suite_reach.py [--runs 5] [--profile default] [-- extra pytest args]

Runs ``pytest conformance --impl reference:pjit_double`` in fresh processes
(the repository in the current directory is the one measured, so a checkout
of an older commit can be compared with this script) and records every input
each check judged.  Prints, as medians over the runs:

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
from collections import defaultdict
from typing import Any


def _record_run(out_path: str, pytest_args: list[str]) -> int:
    """In the child: run pytest in-process, recording each input a check asks a call for."""
    sys.path.insert(0, os.getcwd())
    import numpy as np
    import pytest

    from conformance import kit as kit_module
    from conformance import strategies

    judged: dict[str, set[Any]] = defaultdict(set)
    combos: set[Any] = set()
    lengths: set[int] = set()
    dtypes: set[str] = set()
    meshes: set[Any] = set()
    specials: dict[str, set[int]] = defaultdict(set)
    special_totals: dict[str, int] = {}
    original = kit_module.Kit.call

    # Keys made here, not with conformance.pool.key: older checkouts have no pool.
    def call(self: Any, case: Any, *args: Any, **kwargs: Any) -> Any:
        mesh = case.mesh
        where = None if mesh is None else (tuple(int(d.id) for d in mesh.devices.flat), mesh.devices.shape)
        digest = hashlib.blake2b(case.values.tobytes(), digest_size=8).hexdigest()
        judged[self.check_id].add((str(case.dtype), case.n, digest, where, case.mesh_arg, case.placement))
        combos.add((str(case.dtype), case.n, where))
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

    kit_module.Kit.call = call  # type: ignore[method-assign]
    status = pytest.main(pytest_args)
    with open(out_path, "w") as f:
        json.dump(
            {
                "per_check": {k: len(v) for k, v in judged.items()},
                "inputs": len(set().union(*judged.values())) if judged else 0,
                "combos": len(combos),
                "lengths": len(lengths),
                "dtypes": sorted(dtypes),
                "meshes": sorted(meshes),
                "specials": {k: [len(v), special_totals[k]] for k, v in specials.items()},
            },
            f,
        )
    return int(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--record", metavar="OUT", help=argparse.SUPPRESS)  # the child's side
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    base = ["conformance", "--impl", "reference:pjit_double", "-q", "-p", "no:cacheprovider"]
    base += ["--hypothesis-profile", args.profile, *args.pytest_args]
    if args.record:
        sys.exit(_record_run(args.record, base))
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            out = os.path.join(tmp, f"run{i}.json")
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--record", out, "--", *args.pytest_args],
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                sys.exit(f"run {i} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
            with open(out) as f:
                run = json.load(f)
            line = next(x for x in proc.stdout.splitlines() if x.startswith("timing:"))
            run["wall"] = wall
            run["compiles"] = int(line.split(" backend compiles")[0].split()[-1])
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
