"""How often the examples' tests catch their broken variants with few examples: before and after
the library could hold each row to its own tolerance and compare replicas (issue 28).

    python bench/examples_catch_rate.py [--examples 5] [--seeds 10]

For every broken variant of examples/test_broken_variants.py and every seed, each test file's
tests run on the variant in this process with ``max_examples`` examples and that seed; the
variant counts as caught under a seed when any of the tests that should catch it fails with an
``AssertionFailed``.  Two columns:

* ``after``: the tests as written;
* ``before``: the same tests as the library before issue 28 let them be written: a tolerance
  array or pytree becomes one scalar per leaf, its largest bound (the worst row's), and
  ``assert_replicas_agree``, which did not exist, checks nothing.

Prints one row per variant and the totals.  No timed assertions; nothing here is a test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _scalar_per_leaf(tolerance: Any) -> Any:
    """An array or a pytree of tolerances as the old library took them: one scalar per leaf."""
    import jax
    import numpy as np

    if tolerance is None or isinstance(tolerance, (int, float)):
        return tolerance
    return jax.tree_util.tree_map(lambda v: float(np.max(v)), tolerance)


def _old_library(module: Any) -> None:
    """Rebind the module's assertions to what the library before issue 28 offered."""
    import jax

    close = module.__dict__.get("assert_values_close")
    if close is not None:

        def assert_values_close(
            got: Any, expected: Any, *, rtol: Any = None, atol: Any = None, **kw: Any
        ) -> None:
            r, a = _scalar_per_leaf(rtol), _scalar_per_leaf(atol)
            leaves = jax.tree_util.tree_leaves
            if isinstance(r, dict) or isinstance(a, dict):  # one scalar for the whole tree: the largest
                r = None if r is None else max(leaves(r))
                a = None if a is None else max(leaves(a))
            close(got, expected, rtol=r, atol=a, **kw)

        module.assert_values_close = assert_values_close
    if "assert_replicas_agree" in module.__dict__:
        module.assert_replicas_agree = lambda *args, **kwargs: None


def _load(name: str, examples: int) -> Any:
    """The example test module, its ``max_examples=25`` made ``examples`` and no example database
    (every seed draws afresh)."""
    import types

    source = (EXAMPLES / f"{name}.py").read_text()
    assert "settings(max_examples=25, deadline=None)" in source, name
    source = source.replace(  # no shrinking: a seed that finds a failure has caught the variant
        "settings(max_examples=25, deadline=None)",
        f"settings(max_examples={examples}, deadline=None, database=None, phases=[Phase.generate])",
    )
    module = types.ModuleType(name)
    module.__file__ = str(EXAMPLES / f"{name}.py")
    module.__dict__["Phase"] = __import__("hypothesis").Phase
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 -- the repository's own file
    return module


def _caught(module: Any, tests: list[str], implementation: Callable[..., Any], seed: int) -> bool:
    from hypothesis import seed as with_seed

    from conformance.assertions import AssertionFailed

    for name in tests:
        test = with_seed(seed)(getattr(module, name))
        try:
            test(implementation)
        except AssertionFailed:
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)

    from conformance.devices import ensure_host_devices

    ensure_host_devices(8)
    sys.path.insert(0, str(EXAMPLES))
    sys.path.insert(0, str(ROOT))
    import sharded_ops

    from examples.test_broken_variants import test_broken_variant_is_caught

    marks = getattr(test_broken_variant_is_caught, "pytestmark")  # noqa: B009 -- pytest.mark sets it
    cases = [mark.args for mark in marks if mark.name == "parametrize"][0][1]
    print(
        f"{'example':<24} {'variant':<20} {'before':>8} {'after':>8}   "
        f"({args.examples} examples, seeds 0-{args.seeds - 1})",
        flush=True,
    )
    totals = [0, 0]
    for test_file, variant, failing, _passing in cases:
        name = test_file.removesuffix(".py")
        rates = []
        for old in (True, False):
            module = _load(name, args.examples)
            if old:
                _old_library(module)
            implementation = sharded_ops.BROKEN[module.FUNCTION][variant]
            caught = sum(_caught(module, failing, implementation, k) for k in range(args.seeds))
            rates.append(caught)
        for k, caught in enumerate(rates):
            totals[k] += caught
        print(f"{name:<24} {variant:<20} {rates[0]:>5}/{args.seeds} {rates[1]:>5}/{args.seeds}", flush=True)
    n = len(cases) * args.seeds
    print(f"{'total':<45} {totals[0]:>5}/{n} {totals[1]:>5}/{n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
