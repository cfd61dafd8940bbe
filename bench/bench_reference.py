"""Per-call cost of the reference against the dispatch floor, in one process.

    python bench/bench_reference.py [--quick]

For n = 16, 2^12, 2^20, 2^24 (float32) on the default mesh and on an
8-device mesh, times steady-state calls of:

* ``prebuilt``  -- a ``jax.jit(f, in_shardings=s, out_shardings=s)`` held by the caller: the floor
* ``reference`` -- ``reference.pjit_double``
* ``exercise``  -- the exercise's own shape: a new mesh, sharding and jit per call
* ``numpy``     -- NumPy's ``2 * x`` on a host array

Rounds interleave the contenders, in a shuffled order, so that drift on a
shared machine hits them alike; each figure is the median over rounds of the mean call time in
a round.  Ratios are to ``prebuilt``.  The input is committed with the target
layout, as a caller that reuses results would hold it.

The table ends with the goals of issue 5, each marked held or missed:
reference / prebuilt <= 1.3 at n = 16 and <= 1.1 at 2^20 and 2^24, and the
reference >= 1000x faster than the exercise per steady-state call.  Where
even the pre-built jit is not 1000x faster than the exercise (the column
``exer/pre``: the most any implementation can reach, since none beats the
floor), that goal is marked out of reach rather than missed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax

jax.config.update("jax_num_cpu_devices", 8)

import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from reference import pjit_double  # noqa: E402

SIZES = (16, 2**12, 2**20, 2**24)


def exercise_style(x: jax.Array, mesh: Mesh | None) -> jax.Array:
    """The exercise's own solution: everything rebuilt on every call."""
    m = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
    s = NamedSharding(m, PartitionSpec("data"))
    return jax.jit(lambda v: v * 2, in_shardings=s, out_shardings=s)(x)


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def measure(n: int, mesh: Mesh | None, rounds: int) -> dict[str, float]:
    target_mesh = mesh if mesh is not None else Mesh(np.array(jax.devices()[:1]), ("data",))
    s = NamedSharding(target_mesh, PartitionSpec("data"))
    host = np.arange(n, dtype=np.float32)
    x = jax.device_put(host, s)
    prebuilt = jax.jit(lambda v: v * 2, in_shardings=s, out_shardings=s)
    contenders: dict[str, Callable[[], object]] = {
        "prebuilt": lambda: prebuilt(x),
        "reference": lambda: pjit_double(x, mesh=mesh),
        "exercise": lambda: exercise_style(x, mesh),
        "numpy": lambda: 2 * host,
    }
    # Calls per round: enough to take ~50 ms, at least 3 (a single 20 ms call is a noisy
    # sample) and at most 2000; the exercise, which compiles every call, gets 3.
    calls = {}
    for name, fn in contenders.items():
        jax.block_until_ready(fn())  # compile and warm up
        one = per_call(fn, 1)
        calls[name] = max(3, min(2000, int(0.05 / max(one, 1e-7))))
        if name == "exercise":
            calls[name] = min(calls[name], 3)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    shuffle = random.Random(n).shuffle
    for _ in range(rounds):
        shuffle(order)  # no contender always runs right after the exercise's compiles
        for name in order:
            fn = contenders[name]
            samples[name].append(per_call(fn, calls[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:9.1f} us"
    return f"{seconds * 1e3:9.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 rounds, sizes up to 2^20")
    args = parser.parse_args()
    rounds = 5 if args.quick else args.rounds
    sizes = SIZES[:3] if args.quick else SIZES
    meshes = {"default": None, "8-device": Mesh(np.array(jax.devices()[:8]), ("data",))}
    print(f"jax {jax.__version__}, {len(jax.devices())} CPU devices, {rounds} rounds, medians per call")
    header = (
        f"{'mesh':<9} {'n':>9} {'prebuilt':>12} {'reference':>12} {'exercise':>12} {'numpy':>12}"
        f" {'ref/pre':>8} {'exer/ref':>9} {'exer/pre':>9} {'numpy/pre':>9}"
    )
    print(header)
    print("-" * len(header))
    goals: list[str] = []
    for mesh_name, mesh in meshes.items():
        for n in sizes:
            t = measure(n, mesh, rounds)
            ref_pre = t["reference"] / t["prebuilt"]
            exer_ref = t["exercise"] / t["reference"]
            exer_pre = t["exercise"] / t["prebuilt"]
            print(
                f"{mesh_name:<9} {n:>9} {fmt(t['prebuilt'])} {fmt(t['reference'])} {fmt(t['exercise'])}"
                f" {fmt(t['numpy'])} {ref_pre:8.2f} {exer_ref:9.0f} {exer_pre:9.0f}"
                f" {t['numpy'] / t['prebuilt']:9.2f}",
                flush=True,
            )
            goals += _goals(f"{mesh_name} n={n}", n, ref_pre, exer_ref, exer_pre)
    print("\ngoals:")
    for line in goals:
        print("  " + line)


def _goals(where: str, n: int, ref_pre: float, exer_ref: float, exer_pre: float) -> list[str]:
    """Issue 5's goals for one row, each held, missed or out of reach."""
    lines = []
    limit = {16: 1.3, 2**20: 1.1, 2**24: 1.1}.get(n)
    if limit is not None:
        verdict = "held" if ref_pre <= limit else "MISSED"
        lines.append(f"{verdict:<12} {where}: reference/prebuilt {ref_pre:.2f} <= {limit}")
    if exer_ref >= 1000:
        verdict = "held"
    elif exer_pre < 1000:
        verdict = "out of reach"  # the floor itself is not 1000x faster than the exercise
    else:
        verdict = "MISSED"
    lines.append(
        f"{verdict:<12} {where}: exercise/reference {exer_ref:.0f}x >= 1000x "
        f"(exercise/prebuilt {exer_pre:.0f}x)"
    )
    return lines


if __name__ == "__main__":
    main()
