"""Declared contracts (``conformance.contracts``): validated when built, a usage error under the
kit's command line when wrong, and the kit's whole judgement on the example contracts
(examples/contracts/): the correct functions pass, each broken variant fails the check it breaks.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from conformance.contracts import Argument, Contract, ContractError, by_dtype
from tests.kit_process import run_kit, run_kit_report, statuses, verdict

ROOT = Path(__file__).resolve().parent.parent
X = Argument("x", rank=2, dtypes=("float32",), layouts=(P("data", None),))


def _good(**change: Any) -> dict[str, Any]:
    fields: dict[str, Any] = dict(name="identity", arguments=[X], out=P("data", None), oracle=lambda x: x)
    fields.update(change)
    return fields


# ---------------------------------------------------------------------------
# Built and validated: one ContractError naming the field and the value


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"oracle": None}, "oracle", "must be a NumPy function"),
        ({"arguments": []}, "arguments", "non-empty sequence of Argument"),
        ({"arguments": [object()]}, "arguments[0]", "must be an Argument"),
        ({"out": P("rows")}, "out", "names mesh axis 'rows', which mesh_axes ('data',) lacks"),
        ({"out": "data"}, "out", "must be a PartitionSpec"),
        ({"mesh_axes": ()}, "mesh_axes", "non-empty sequence of axis names"),
        ({"mesh_axes": ("data", "data")}, "mesh_axes", "names an axis twice"),
        ({"mesh": "context"}, "mesh", "must be one of ('keyword', 'inputs', 'none')"),
        ({"mesh": "inputs", "mesh_optional": True}, "mesh_optional", "True only with mesh='keyword'"),
        ({"accept": lambda x: x}, "accept", "a sequence of NumPy functions"),
        ({"accept": [None]}, "accept[0]", "must be a NumPy function"),
        ({"dtype": "float32"}, "dtype", "must be a function of the input dtypes"),
        ({"raises": "ValueError"}, "raises", "must be an exception class"),
        ({"keywords": {1: 2}}, "keywords", "dict of keyword options"),
        ({"min_side": 5, "max_side": 4}, "max_side", "0 <= min_side <= max_side, 1 <= max_side"),
    ],
)
def test_a_bad_contract_field_is_one_error_naming_it(change: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ContractError) as error:
        Contract(**_good(**change))
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}="), error.value
    assert words in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "kwargs, field, words",
    [
        ({"rank": 2, "dtypes": ("float33",)}, "Argument('x').dtypes", "not a dtype JAX has"),
        ({"rank": 0}, "Argument('x').rank", "must be an int >= 1"),
        ({}, "Argument('x').rank", "exactly one of rank= and shape="),
        ({"rank": 2, "layouts": P("data")}, "Argument('x').layouts", "non-empty sequence of PartitionSpecs"),
        ({"rank": 2, "layouts": ("data",)}, "Argument('x').layouts", "must be a jax.sharding.PartitionSpec"),
        ({"rank": 2, "placements": ("host",)}, "Argument('x').placements", "non-empty sequence of"),
    ],
)
def test_a_bad_argument_field_is_one_error_naming_it(kwargs: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ContractError) as error:
        Argument("x", **{"layouts": (P("data"),), **kwargs})
    assert error.value.field == field, error.value
    assert words in str(error.value)


def test_a_layout_naming_an_axis_the_mesh_lacks_names_the_argument_and_the_layout() -> None:
    with pytest.raises(ContractError, match=r"^Argument\('x'\)\.layouts\[0\]=P\('rows'"):
        Contract(**_good(arguments=[Argument("x", rank=1, dtypes=("float32",), layouts=(P("rows"),))]))


def test_mesh_from_inputs_refuses_numpy_placements() -> None:
    with pytest.raises(ContractError, match="carries no mesh"):
        Contract(**_good(mesh="inputs"))
    committed = Argument(
        "x", rank=2, dtypes=("float32",), layouts=(P("data", None),), placements=("layouts",)
    )
    assert Contract(**_good(mesh="inputs", arguments=[committed])).mesh == "inputs"


def test_a_good_contract_keeps_what_it_was_given() -> None:
    contract = Contract(**_good(keywords={"eps": 1e-5}, raises=ValueError))
    assert contract.first is X and contract.arguments == (X,)
    assert contract.mesh_axes == ("data",) and contract.keywords == {"eps": 1e-5}
    assert X.dtypes == ("float32",) and X.layouts == (P("data", None),)


# ---------------------------------------------------------------------------
# Under the command line: exit 4, one line naming the field

BAD_CONTRACTS = """
import numpy as np
from jax.sharding import PartitionSpec as P
from conformance.contracts import Argument, Contract

def identity(x, *, mesh):
    return x

def raising(x):
    raise RuntimeError("the oracle fell over")

X = Argument("x", rank=1, dtypes=("float32",), layouts=(P("data"),))
GOOD = Contract(name="identity", arguments=[X], out=P("data"), oracle=lambda x: x)
ORACLE_RAISES = Contract(name="identity", arguments=[X], out=P("data"), oracle=raising)
ORACLE_TREE = Contract(
    name="identity", arguments=[X], out={"y": P("data"), "n": P()}, oracle=lambda x: {"y": x}
)
NOT_A_CONTRACT = 42
"""

BUILT_BADLY = {
    "missing-oracle": (
        "Contract(name='c', arguments=[X], out=P('data'), oracle=None)",
        "oracle=None: must be",
    ),
    "axis-the-mesh-lacks": (
        "Contract(name='c', arguments=[X], out=P('model'), oracle=lambda x: x)",
        "out=P('model',): names mesh axis 'model', which mesh_axes ('data',) lacks",
    ),
    "tolerance-raises": (
        "Contract(name='c', arguments=[X], out=P('data'), oracle=lambda x: x, atol=lambda x: 1 / 0)",
        "raised ZeroDivisionError: division by zero on float32 inputs of shapes [(4,)]",
    ),
    "tolerance-negative": (
        "Contract(name='c', arguments=[X], out=P('data'), oracle=lambda x: x, rtol=lambda x: -np.abs(x))",
        "a tolerance must be >= 0 (and not NaN) on the kit's small inputs",
    ),
    "dtype-jax-lacks": (
        "Contract(name='c', arguments=[Argument('x', rank=1, dtypes=('float33',), layouts=(P('data'),))], "
        "out=P('data'), oracle=lambda x: x)",
        "Argument('x').dtypes='float33': not a dtype JAX has",
    ),
    "only-64-bit": (
        "Contract(name='c', arguments=[Argument('x', rank=1, dtypes=('float64',), layouts=(P('data'),))], "
        "out=P('data'), oracle=lambda x: x)",
        "every one is 64-bit, and jax_enable_x64 is off",
    ),
}


def _bad_contract(kind: str, attr: str, cause: str, source: str = BAD_CONTRACTS) -> Any:
    argv = [
        sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
        "--impl", f"{{tmp}}/contracts_{kind}.py:identity",
        "--contract", f"{{tmp}}/contracts_{kind}.py:{attr}",
    ]  # fmt: skip
    files = {f"contracts_{kind}.py": source}
    mark = pytest.mark.background(
        f"contract-{kind}", argv, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, files=files
    )
    return pytest.param(attr, cause, id=kind, marks=mark)


E2E_BAD = [
    *(
        _bad_contract(kind, "C", cause, BAD_CONTRACTS + f"C = {built}\n")
        for kind, (built, cause) in BUILT_BADLY.items()
    ),
    _bad_contract(
        "oracle-raises", "ORACLE_RAISES", "oracle=raising: raised RuntimeError: the oracle fell over"
    ),
    _bad_contract("oracle-tree", "ORACLE_TREE", "but out has PyTreeDef({'n': *, 'y': *})"),
    _bad_contract("not-a-contract", "NOT_A_CONTRACT", "is a int, not a conformance.contracts.Contract"),
    _bad_contract("no-such-name", "NOPE", "has no attribute 'NOPE'"),
]


@pytest.mark.parametrize("attr, cause", E2E_BAD)
def test_a_bad_contract_is_a_usage_error_of_one_line(bg_run: Any, attr: str, cause: str) -> None:
    assert bg_run.returncode == 4, bg_run
    lines = [line for line in bg_run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, bg_run
    assert re.fullmatch(rf"ERROR: --contract \S+:{attr}: .+", lines[0]), bg_run
    assert cause in lines[0], bg_run


def test_a_function_the_contract_cannot_call_is_not_conforming(tmp_path: Path) -> None:
    """Without the mesh keyword a mesh="keyword" contract hands over: the gate fn.signature fails
    (exit 1, the other checks not run), as pjit_double's api.mesh-keyword does; before, a usage
    error (exit 4), which said nothing of the function."""
    module = tmp_path / "nomesh.py"
    module.write_text("def f(x):\n    return x\n")
    done, report = run_kit_report(
        "--pyargs", "conformance", "--impl", f"{module}:f",
        "--contract", f"{EXAMPLES / 'softmax.py'}:CONTRACT",
    )  # fmt: skip
    assert report is not None and done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    found = statuses(report)
    assert found.pop("fn.signature") == "failed" and set(found.values()) == {"not run"}, found
    assert "got:      " + f"{module}:f: got an unexpected keyword argument 'mesh'" in done.stdout
    assert "hint:     take the mesh by keyword, def f(x, *, mesh)" in done.stdout, done.stdout[-3000:]


# ---------------------------------------------------------------------------
# The example contracts, run as users run them

EXAMPLES = ROOT / "examples" / "contracts"
# (file, function) -> the check that must fail; None for a correct function (a whole run, exit 0).
# A broken variant runs that check alone (--check, seeded): exit 1 with it failed.
VERDICTS: dict[tuple[str, str], str | None] = {
    ("softmax", "softmax"): None,
    ("softmax", "stale_mesh"): "fn.layout",
    ("softmax", "evicting"): "fn.compile-once",
    ("softmax", "no_max_shift"): "fn.values",
    ("softmax", "eager"): "fn.jit",
    ("softmax", "trusts_committed"): "fn.values",
    ("centring", "center"): None,
    ("centring", "local_mean"): "fn.values",
    ("centring", "evicting"): "fn.compile-once",
    ("centring", "donating"): "fn.input-intact",
    ("layer_norm", "layer_norm"): None,
    ("layer_norm", "stats_replicated"): "fn.layout",
    ("layer_norm", "stale_mesh"): "fn.histories",
    ("layer_norm", "one_pass_variance"): "fn.values",
    # oracle=ITSELF: the function's own result on one device is the reference.
    ("scan", "cumsum"): None,
    ("scan", "no_carry"): "fn.values",
    ("scan", "carry_all"): "fn.values",
    ("scan", "carry_reversed"): "fn.values",
    ("scan", "wrong_axis"): "fn.values",
    # Caches of jitted functions that evict or go stale (examples/contracts/caches.py): the planned
    # histories of fn.histories reach each of them by construction (first_context: its first calls
    # under a context, in fresh processes).
    **{
        (name, f"cache_{kind}"): "fn.histories"
        for name in ("softmax", "centring", "layer_norm", "scan")
        for kind in (
            *("last_only", "two_meshes", "device_set", "flat_ids", "mesh_shape", "axis_names"),
            "first_context",
        )
    },
}


def _example(name: str, function: str, *more: str) -> tuple[Any, dict[str, Any] | None]:
    path = EXAMPLES / f"{name}.py"
    return run_kit_report(
        "--pyargs", "conformance", "--impl", f"{path}:{function}", "--contract", f"{path}:CONTRACT", *more,
        timeout=300,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name, function", list(VERDICTS), ids=[f"{n}:{f}" for n, f in VERDICTS])
def test_the_example_contracts_pass_the_correct_and_catch_the_broken(name: str, function: str) -> None:
    failing = VERDICTS[(name, function)]
    # Seeded, as the kit's mutant tests are: a broken variant's catch rate over fresh draws is
    # bench/examples_catch_rate.py's question, not a test's.
    done, report = _example(name, function, *(["--check", failing, "--hypothesis-seed=0"] if failing else []))
    assert report is not None, done.stdout[-3000:] + done.stderr[-3000:]
    found = statuses(report)
    if failing is None:
        assert done.returncode == 0 and verdict(report) == "conforming", done.stdout[-4000:]
        assert set(found) >= {"fn.values", "fn.layout", "fn.jit", "fn.histories", "fn.compile-once"}
        import json

        import jsonschema

        jsonschema.validate(report, json.loads((ROOT / "conformance" / "report-schema.json").read_text()))
    else:
        assert done.returncode == 1 and verdict(report) == "not conforming", done.stdout[-4000:]
        assert found[failing] == "failed", (found, done.stdout[-4000:])


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, function", [("layer_norm", "cache_mesh_shape"), ("softmax", "cache_first_context")]
)
def test_the_rerun_line_of_a_failing_declared_history_replays_it_in_a_fresh_process(
    name: str, function: str
) -> None:
    """A stale cache fails fn.histories; the --case token of its rerun line names exactly the
    shrunk history, which fails again, call for call, in a process whose cache starts empty (a
    cache that keeps its first call's context: that call under its context, the process's first)."""
    done, report = _example(name, function, "--check", "fn.histories")
    assert report is not None and statuses(report)["fn.histories"] == "failed", done.stdout[-3000:]
    failure = done.stdout[done.stdout.index("[fn.histories]") :]
    history = re.findall(r"^    \d+\. .+$", failure.split("  rerun:")[0], re.M)
    rerun = shlex.split(re.search(r"^  rerun:    (.+)$", failure, re.M).group(1))  # type: ignore[union-attr]
    assert "--case" in rerun and 2 <= len(history), failure[:3000]
    again, replayed = run_kit_report(*rerun[rerun.index("--pyargs") :], timeout=300)
    assert replayed is not None, again.stdout[-3000:] + again.stderr[-2000:]
    assert again.returncode == 1 and statuses(replayed)["fn.histories"] == "failed", again.stdout[-3000:]
    block = again.stdout[again.stdout.index("[fn.histories]") :]
    assert re.findall(r"^    \d+\. .+$", block.split("  rerun:")[0], re.M) == history, block[:3000]


TOLERANCE_MODULE = """
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from conformance.contracts import Argument, Contract

ROWS = P("data", None)


def scaled(x, *, mesh):
    \"\"\"x times 1.001: off by 0.1 % of each value.\"\"\"
    rows = NamedSharding(mesh, ROWS)
    return jax.jit(lambda v: v * 1.001, in_shardings=rows, out_shardings=rows)(jax.device_put(x, rows))


def _contract(share):
    return Contract(
        name="identity",
        arguments=[Argument("x", rank=2, dtypes=("float32",), layouts=(ROWS,))],
        out=ROWS,
        oracle=lambda x: x,
        rtol=0.0,
        atol=lambda x: share * np.abs(x) + 1e-6,  # each element's own bound, from its value
    )


WIDE, NARROW = _contract(0.002), _contract(0.0005)
"""


def _values_run(module: Path, function: str, contract: str = "CONTRACT", *more: str) -> Any:
    """``fn.values`` alone, seeded, on ``module``'s ``function`` under its ``contract``."""
    return run_kit(
        "--pyargs", "conformance", "--impl", f"{module}:{function}", "--contract", f"{module}:{contract}",
        "--check", "fn.values", "--hypothesis-seed=0", *more,
    )  # fmt: skip


@pytest.mark.parametrize("name, status", [("WIDE", 0), ("NARROW", 1)])
def test_a_tolerance_may_be_a_function_of_the_inputs(name: str, status: int, tmp_path: Path) -> None:
    """atol=lambda x: ...: each call's bound comes from its own values, element by element."""
    module = tmp_path / "tolerances.py"
    module.write_text(TOLERANCE_MODULE)
    done = _values_run(module, "scaled", name)
    assert done.returncode == (2 if status == 0 else 1), done.stdout[-3000:] + done.stderr[-2000:]
    assert bool(re.search(r"^\[fn\.values\] ", done.stdout, re.M)) == (status == 1), done.stdout[-3000:]


X64_MODULE = """
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

from conformance.contracts import Argument, Contract


def kept(x, *, mesh):
    data = NamedSharding(mesh, P("data"))
    return jax.jit(lambda v: v, in_shardings=data, out_shardings=data)(x)


X = Argument("x", rank=1, dtypes=("float32", "float64"), layouts=(P("data"),), placements=("layouts",))
CONTRACT = Contract(name="kept", arguments=[X], out=P("data"), oracle=lambda x: x)
"""


def _seeded_run(
    module: Path, source: str, function: str, contract: str, *checks: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``source`` written to ``module``, its ``function`` judged under its ``contract`` by
    ``checks`` alone, --hypothesis-seed=0: the run and its JSON report."""
    module.write_text(source)
    return run_kit_report(
        "--pyargs", "conformance", "--impl", f"{module}:{function}", "--contract", f"{module}:{contract}",
        *(a for c in checks for a in ("--check", c)), "--hypothesis-seed=0",
    )  # fmt: skip


def test_64_bit_dtypes_are_drawn_only_where_jax_enable_x64_is_on(tmp_path: Path) -> None:
    """Without x64, JAX makes a float64 argument float32: the kit drew it anyway, and a correct
    function failed fn.dtype and fn.input-intact (the arguments' dtype changed)."""
    done, report = _seeded_run(
        tmp_path / "x64.py", X64_MODULE, "kept", "CONTRACT", "fn.dtype", "fn.input-intact"
    )
    assert report is not None, done.stdout[-3000:] + done.stderr[-2000:]
    found = statuses(report)
    assert (found["fn.dtype"], found["fn.input-intact"]) == ("passed", "passed"), done.stdout[-3000:]


ROWS_MODULE = """
import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from conformance.contracts import Argument, Contract

ROWS = P("data", None)
_JITTED = {}


def _doubled(x, mesh):
    rows = NamedSharding(mesh, ROWS)
    if mesh not in _JITTED:
        _JITTED[mesh] = jax.jit(lambda v: v * 2, in_shardings=rows, out_shardings=rows)
    return _JITTED[mesh](jax.device_put(x, rows))


def first_device(x):
    return _doubled(x, Mesh(np.array(jax.devices()[:1]), ("data",)))


def last_device(x):
    return _doubled(x, Mesh(np.array(jax.devices()[-1:]), ("data",)))


def optional(x, *, mesh=None):
    return _doubled(x, Mesh(np.array(jax.devices()[:1]), ("data",)) if mesh is None else mesh)


def optional_all_devices(x, *, mesh=None):
    return _doubled(x, Mesh(np.array(jax.devices()), ("data",)) if mesh is None else mesh)


def doubled_plus_one(x, *, mesh):
    return _doubled(x, mesh) + 1  # what ACCEPTS' accept= allows besides its oracle's


def converts(x, *, mesh):
    return _doubled(np.asarray(x, dtype=x.dtype.newbyteorder("=")), mesh)


def swaps_in_place(x, *, mesh):
    if not x.dtype.isnative:
        x = x.byteswap(inplace=True).view(x.dtype.newbyteorder())
    return _doubled(x, mesh)


def makes_writeable(x, *, mesh):
    if not x.flags.writeable and x.base is None:
        x.flags.writeable = True
    return _doubled(np.asarray(x, dtype=x.dtype.newbyteorder("=")), mesh)


@functools.lru_cache(maxsize=5)
def _five_latest(mesh):
    rows = NamedSharding(mesh, ROWS)
    return jax.jit(lambda v: v * 2, in_shardings=rows, out_shardings=rows), rows


def lru_five(x, *, mesh):
    jitted, rows = _five_latest(mesh)  # a sixth mesh evicts the least recent: it compiles again
    return jitted(jax.device_put(x, rows))


_BY_DEVICE_ARRAY = {}


def keyed_on_device_array(x, *, mesh):
    key = (mesh.devices.shape, tuple(int(d.id) for d in mesh.devices.flat))  # the names left out
    first = _BY_DEVICE_ARRAY.setdefault(key, mesh)
    return _doubled(x, first)


_BY_ADDRESS = {}


def memo_by_address(x, *, mesh):
    if not isinstance(x, np.ndarray):
        return _doubled(x, mesh)
    key = (x.ctypes.data, x.shape, mesh)  # the host buffer, not the values in it
    if key not in _BY_ADDRESS:  # x kept: its buffer is never freed for another array to take
        _BY_ADDRESS[key] = (x, _doubled(x, mesh))
    return _BY_ADDRESS[key][1]


X = Argument("x", rank=2, dtypes=("float32",), layouts=(ROWS,), placements=("layouts", "numpy"))
PLAIN = Contract(name="rows doubled", arguments=[X], out=ROWS, oracle=lambda x: x * 2)
NONE = Contract(name="rows doubled", arguments=[X], out=ROWS, oracle=lambda x: x * 2, mesh="none")
OPTIONAL = Contract(name="rows doubled", arguments=[X], out=ROWS, oracle=lambda x: x * 2, mesh_optional=True)
ACCEPTS = Contract(
    name="rows doubled", arguments=[X], out=ROWS, oracle=lambda x: x * 2, accept=(lambda x: x * 2 + 1,)
)
# Values from 1 up: a byte swap in place shows in every one (zeros read the same either way).
VALUES = {"min_value": 1.0, "max_value": 100.0}
Y = Argument("x", rank=2, dtypes=("float32",), layouts=(ROWS,), placements=("numpy-forms",), values=VALUES)
NUMPY_FORMS = Contract(name="rows doubled", arguments=[Y], out=ROWS, oracle=lambda x: x * 2)
"""


def test_fn_values_takes_the_results_the_contract_accepts(tmp_path: Path) -> None:
    """accept=: other results a correct function may give (pjit_double's 2 * x for complex x).
    fn.values ignored them: every call of a function giving one failed."""
    module = tmp_path / "accepts.py"
    module.write_text(ROWS_MODULE)
    done = _values_run(module, "doubled_plus_one", "ACCEPTS")
    passed = "PASSED conformance/test_conformance.py::test_check[fn.values]"
    assert done.returncode == 2 and passed in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize(
    "function, contract, failing",
    [
        ("first_device", "NONE", None),
        ("last_device", "NONE", "fn.layout"),
        ("optional", "OPTIONAL", None),
        ("optional_all_devices", "OPTIONAL", "fn.layout"),
    ],
)
def test_a_function_given_no_mesh_is_judged_on_the_first_device(
    function: str, contract: str, failing: str | None, tmp_path: Path
) -> None:
    """mesh="none", or mesh=None and no mesh where mesh_optional: the result's target is the
    first device alone.  Before, a declared call's target was always the drawn mesh: a correct
    function that takes no mesh failed, and one that lays mesh=None out over every device passed."""
    done, report = _seeded_run(
        tmp_path / "no_mesh.py", ROWS_MODULE, function, contract, "fn.layout", "fn.histories"
    )
    assert report is not None, done.stdout[-3000:] + done.stderr[-2000:]
    found, out = statuses(report), done.stdout[-3000:]
    if failing is None:
        assert [found[c] for c in ("fn.layout", "fn.histories")] == ["passed"] * 2, out
    else:
        assert found[failing] == "failed", out
    if function == "last_device":  # all devices may raise first, where the rows do not divide
        assert "the result lies on the first device, jax.devices()[0], alone" in done.stdout, out


@pytest.mark.parametrize(
    "function, status", [("converts", "passed"), ("swaps_in_place", "failed"), ("makes_writeable", "failed")]
)
def test_numpy_arrays_as_users_have_them_stay_intact(function: str, status: str, tmp_path: Path) -> None:
    """placements=("numpy-forms",): strided and reversed views, the other byte order, read-only;
    the caller's array keeps its values, byte order and flags (before: only plain NumPy arrays)."""
    done, report = _seeded_run(
        tmp_path / "numpy_forms.py", ROWS_MODULE, function, "NUMPY_FORMS", "fn.input-intact"
    )
    assert report is not None, done.stdout[-3000:] + done.stderr[-2000:]
    assert statuses(report)["fn.input-intact"] == status, done.stdout[-3000:]


@pytest.mark.parametrize(
    "function, said",
    [
        ("lru_five", "a call like an earlier one of this history compiled again"),
        ("keyed_on_device_array", "which shares the same devices in the same flat order"),
        ("memo_by_address", "wrote new values into the NumPy arrays of an earlier call"),
    ],
)
def test_caches_of_five_keys_blind_to_axis_names_or_keyed_on_host_buffers_fail_the_planned_histories(
    function: str, said: str, tmp_path: Path
) -> None:
    """The planned histories ``wide`` (8 keys, then the first again), ``names`` (one device
    array, its axis names reversed) and ``moves`` (a NumPy argument rewritten in place, given
    again) reach these caches in every run; before them, only a searched history that chanced
    on one did."""
    done, report = _seeded_run(tmp_path / "caches.py", ROWS_MODULE, function, "PLAIN", "fn.histories")
    assert report is not None, done.stdout[-3000:] + done.stderr[-2000:]
    assert statuses(report)["fn.histories"] == "failed" and said in done.stdout, done.stdout[-3000:]


FLAKY_MODULE = """
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

from conformance.contracts import Argument, Contract

ROWS = P("data", None)
CALLS = [0]


def fifth_call_wrong(x, *, mesh):
    \"\"\"Right but on the process's fifth call: its replay passes (the state changed).\"\"\"
    CALLS[0] += 1
    rows = NamedSharding(mesh, ROWS)
    shift = 1.0 if CALLS[0] == 5 else 0.0
    return jax.jit(lambda v: v + shift, in_shardings=rows, out_shardings=rows)(jax.device_put(x, rows))


CONTRACT = Contract(
    name="identity",
    arguments=[Argument("x", rank=2, dtypes=("float32",), layouts=(ROWS,))],
    out=ROWS,
    oracle=lambda x: x,
)
"""


def test_a_failure_whose_replay_passes_is_one_block(tmp_path: Path) -> None:
    """The function's state changed between the failing example and its replay (Hypothesis's
    FlakyFailure): the failure stands, printed as the kit's block, not as Hypothesis's
    exception group with the kit's frames."""
    module = tmp_path / "flaky.py"
    module.write_text(FLAKY_MODULE)
    done = _values_run(module, "fifth_call_wrong")
    assert done.returncode == 1, done.stdout[-3000:]
    assert re.search(r"^\[fn\.values\] ", done.stdout, re.M), done.stdout[-3000:]
    for said in ("FlakyFailure", "Failed to reproduce", "conformance/_src", "ExceptionGroup"):
        assert said not in done.stdout, (said, done.stdout[-6000:])


@pytest.mark.parametrize("traceback", ["auto", "no"])
def test_each_failure_block_is_printed_once(traceback: str, tmp_path: Path) -> None:
    """pytest's FAILURES section prints the block; the kit's summary below it does not print it
    again (with --tb=no, where pytest prints none, the summary does); the Markdown report has it."""
    path, md = EXAMPLES / "softmax.py", tmp_path / "report.md"
    done = _values_run(path, "no_max_shift", "CONTRACT", f"--tb={traceback}", f"--conformance-report={md}")
    assert done.returncode == 1, done.stdout[-3000:]
    assert len(re.findall(r"^\[fn\.values\] ", done.stdout, re.M)) == 1, done.stdout[-6000:]
    assert done.stdout.count("  rerun:    ") == 1, done.stdout[-6000:]
    assert len(re.findall(r"^\[fn\.values\] ", md.read_text(), re.M)) == 1


@pytest.mark.parametrize(
    "case, check, said",
    [
        ("hnot-a-token", "fn.histories", "not a valid history token of row softmax"),
        ("abc", "fn.values", "--check fn.values takes no case"),
    ],
    ids=["garbage", "other-check"],
)
def test_a_declared_case_token_is_checked_before_any_call(case: str, check: str, said: str) -> None:
    path = EXAMPLES / "softmax.py"
    done = run_kit(
        "--pyargs", "conformance", "--impl", f"{path}:softmax", "--contract", f"{path}:CONTRACT",
        "--check", check, "--case", case,
    )  # fmt: skip
    assert done.returncode == 4 and said in done.stderr, done.stderr[-2000:]


def test_a_declared_history_token_round_trips() -> None:
    """encode, then decode: the same meshes, values (bits), placements and moves."""
    import jax
    from hypothesis import find

    from conformance._src.declared import history
    from conformance._src.declared.contract import load

    contract = load(f"{EXAMPLES / 'layer_norm.py'}:CONTRACT")
    if len(jax.devices()) < 4:
        pytest.skip("the planned stale history needs 4 devices")
    steps = find(history.stale(contract), lambda _: True, settings=None)
    steps = [
        steps[0],
        history.Step(steps[1].call, rewritten=1),
        history.Step(steps[2].call, back=(1, 0), clocks=600),
        history.Step(steps[3].call, raises=True),
        history.Step(steps[4].call, under=("default_device", int(jax.devices()[-1].id))),
        history.Step(steps[5].call, under=("set_mesh",)),
    ]
    optional = dataclasses.replace(contract, mesh_optional=True)  # calls given mesh=None, or no mesh
    steps = [dataclasses.replace(s, call=dataclasses.replace(s.call, contract=optional)) for s in steps]
    for k, given in ((0, "none"), (1, "omit")):
        steps[k] = dataclasses.replace(steps[k], call=dataclasses.replace(steps[k].call, given=given))
    again = history.decode(optional, history.encode(steps))
    assert [s.describe() for s in again] == [s.describe() for s in steps]
    for a, b in zip(again, steps, strict=True):
        assert a.call.mesh == b.call.mesh and a.call.placements == b.call.placements
        assert all(
            x.tobytes() == y.tobytes() and x.dtype == y.dtype
            for x, y in zip(a.call.hosts, b.call.hosts, strict=True)
        )
        assert (a.back, a.rewritten, a.raises, a.clocks, a.call.given) == (
            b.back,
            b.rewritten,
            b.raises,
            b.clocks,
            b.call.given,
        )


FREE_SIDE_MODULE = """
import functools

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from conformance.contracts import Argument, Contract

ROWS = P("data", None)


@functools.cache
def _jitted(mesh):
    rows = NamedSharding(mesh, ROWS)
    return jax.jit(lambda a, b: a @ b.T, in_shardings=(rows, rows), out_shardings=rows), rows


def scores(q, k, *, mesh):
    jitted, rows = _jitted(mesh)
    return jitted(jax.device_put(q, rows), jax.device_put(k, rows))


Q = Argument("q", rank=2, dtypes=("float32",), layouts=(ROWS,), values={"min_value": -4.0, "max_value": 4.0})
K = Argument("k", shape=lambda q: (None, q[1]), layouts=(ROWS,), values={"min_value": -4.0, "max_value": 4.0})
CONTRACT = Contract(name="scores", arguments=[Q, K], out=ROWS, oracle=lambda q, k: q @ k.T, atol=1e-3)


def _bad_shape(q):
    return (q[0], q[1]) if q[0] <= 4 else ("many", q[1])


BROKEN_SHAPE = Contract(
    name="scores",
    arguments=[Q, Argument("k", shape=_bad_shape, layouts=(ROWS,))],
    out=ROWS,
    oracle=lambda q, k: q @ k.T,
    atol=1e-3,
    rtol=1e-4,
)
"""


def test_a_free_side_of_a_later_argument_is_judged_in_every_history(tmp_path: Path) -> None:
    """The planned stale history narrows the first argument's sides for a later mesh; a side a
    later argument's ``shape`` leaves free (None) keeps the one drawn (a crash in the kit's own
    code before, a NOT CONFORMING verdict for a correct function)."""
    done, report = _seeded_run(
        tmp_path / "free_side.py", FREE_SIDE_MODULE, "scores", "CONTRACT", "fn.histories"
    )
    assert report is not None and statuses(report)["fn.histories"] == "passed", done.stdout[-3000:]


def test_a_draw_the_contract_breaks_is_a_kit_error_not_a_verdict(tmp_path: Path) -> None:
    """No call of the function was made: a draw that raises (here the contract's own shape=)
    ends KIT ERROR (exit 3), never NOT CONFORMING."""
    done, report = _seeded_run(
        tmp_path / "free_side.py", FREE_SIDE_MODULE, "scores", "BROKEN_SHAPE", "fn.values"
    )
    assert report is not None and done.returncode == 3, done.stdout[-3000:]
    assert statuses(report)["fn.values"] == "kit error", done.stdout[-3000:]
    assert "no call of the function was made" in done.stdout, done.stdout[-3000:]


def test_a_contract_of_min_side_0_draws_empty_sides_split_as_its_layouts_say() -> None:
    """One side in 8 is 0 (shrinking away from it), on meshes that split it too where JAX's jit
    can (0.9.1 and later); a contract of min_side=1 never draws one."""
    import jax
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from conformance._src.calling.devices import jax_version
    from conformance._src.declared import draw
    from conformance._src.declared.contract import load

    def empty_splits(contract: Any) -> list[int]:
        """How many devices split each empty first argument drawn."""
        found: list[int] = []

        @settings(max_examples=200, database=None, deadline=None, derandomize=True)
        @given(st.data())
        def drawn(data: st.DataObject) -> None:
            call = data.draw(draw.calls(contract))
            if 0 in call.hosts[0].shape:
                found.append(int(call.mesh.shape["data"]) if call.given == draw.GIVEN_MESH else 1)

        drawn()
        return found

    base = dataclasses.replace(load(f"{EXAMPLES / 'pjit_double.py'}:CONTRACT"), mesh_optional=False)
    assert not empty_splits(dataclasses.replace(base, min_side=1))
    empty = empty_splits(dataclasses.replace(base, min_side=0))
    assert empty
    if len(jax.devices()) > 1 and jax_version() >= draw.JIT_SPLITS_EMPTY_FROM:
        assert max(empty) > 1, empty


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "pjit_double"])
def test_the_planned_wide_and_names_swapped_histories_are_what_they_say(name: str) -> None:
    """wide: WIDE keys, each on a mesh of its own, then the first three again (a cache bounded to
    fewer keys evicted them); names: one device array, its axis names reversed, A B A B."""
    import jax
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from conformance._src.declared import history
    from conformance._src.declared.contract import load

    if len(jax.devices()) < 8:
        pytest.skip("the planned histories are built for 8 devices here")
    contract = load(f"{EXAMPLES / (name + '.py')}:CONTRACT")

    @settings(max_examples=3, database=None, deadline=None)
    @given(st.data())
    def each(data: st.DataObject) -> None:
        steps = data.draw(history.wide(contract))
        keys = [s.call.key() for s in steps]
        assert len(steps) == history.WIDE + 3 and len(set(keys)) == history.WIDE
        assert keys[-3:] == keys[:3] and len({s.call.mesh for s in steps}) == history.WIDE
        a, b, *rest = [s.call.mesh for s in data.draw(history.names_swapped(contract))]
        assert rest == [a, b] and (a.devices == b.devices).all()
        assert b.axis_names == a.axis_names[::-1] and sum(k > 1 for k in a.devices.shape) >= 2

    each()


def test_the_oracle_gets_numpy_arrays_and_the_keywords(tmp_path: Path) -> None:
    seen: list[Any] = []

    def oracle(x: np.ndarray, *, eps: float) -> np.ndarray:
        seen.append((type(x), x.dtype, eps))
        return x

    from conformance._src.declared.contract import try_oracle

    try_oracle(Contract(**_good(oracle=oracle, keywords={"eps": 0.5})))
    assert seen == [(np.ndarray, np.dtype("float32"), 0.5)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "function, status, failing", [("softmax", 0, None), ("evicting", 1, "fn.compile-once")]
)
def test_a_declared_contract_runs_across_two_processes(
    function: str, status: int, failing: str | None
) -> None:
    import subprocess

    from tests.kit_process import child_env

    path = EXAMPLES / "softmax.py"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.launch",
            "--processes",
            "2",
            "--devices-per-process",
            "4",
            "--",
            "--pyargs",
            "conformance",
            "-p",
            "no:cacheprovider",
            "--impl",
            f"{path}:{function}",
            "--contract",
            f"{path}:CONTRACT",
        ],  # fmt: skip
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == status, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 processes" in done.stdout, done.stdout[-4000:]
    assert f"process 0: {status}, process 1: {status} -> exit status {status}" in done.stdout
    if failing is not None:
        assert re.search(rf"\| `{re.escape(failing)}` \| failed \|", done.stdout), done.stdout[-4000:]


@pytest.mark.background(
    "contract-neither",
    [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--contract", "fulll"],
    env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
)
def test_a_contract_that_is_neither_named_nor_a_spec_is_a_usage_error(bg_run: Any) -> None:
    assert bg_run.returncode == 4, bg_run
    lines = [line for line in bg_run.stderr.splitlines() if line.strip()]
    assert lines == [
        "ERROR: --contract fulll: give seed, full, or MODULE:ATTR / path/to/file.py:ATTR naming a "
        "conformance.contracts.Contract"
    ], bg_run


def test_a_tolerance_per_dtype_and_a_bad_tolerance() -> None:
    from conformance._src.declared.contract import tolerance_for

    rtol = by_dtype(float32=1e-5, bfloat16={"y": 1e-2})
    contract = Contract(**_good(rtol=rtol))
    assert tolerance_for(contract.rtol, np.dtype("float32")) == 1e-5
    assert tolerance_for(contract.rtol, np.dtype("float16")) is None  # the dtype's default
    with pytest.raises(ContractError, match=r"^rtol='abc': must be a number >= 0"):
        Contract(**_good(rtol="abc"))
    with pytest.raises(ContractError, match=r"^atol=\{'y': -1\.0\}: a tolerance must be >= 0"):
        Contract(**_good(atol={"y": -1.0}))
    with pytest.raises(ContractError, match=r"^by_dtype\(float33=\.\.\.\)='float33': not a dtype JAX has"):
        by_dtype(float33=1e-3)


# ---------------------------------------------------------------------------
# pjit_double declared with the same API, and the one-vector form


def test_seed_and_full_are_declared_with_the_public_api() -> None:
    """--contract seed and full name conformance.contracts.SEED and FULL, built with Contract."""
    from conformance._src.declared.terms import dtypes_in_domain, named
    from conformance.contracts import FULL, PJIT_DOUBLE, SEED

    assert named("seed") is SEED and named("full") is FULL and PJIT_DOUBLE is FULL
    assert (SEED.name, SEED.mesh, SEED.takes_mesh) == ("seed", "none", False)
    assert (FULL.name, FULL.mesh, FULL.mesh_optional, FULL.raises) == ("full", "keyword", True, ValueError)
    assert SEED.one_vector() is None and FULL.one_vector() is None
    assert [d.name for d in dtypes_in_domain(SEED)] == ["float32"]
    assert len(dtypes_in_domain(FULL)) == 10 and len(dtypes_in_domain(FULL, x64=True)) == 13


EVERY_VALUE = {"allow_nan": True, "allow_infinity": True, "allow_subnormal": True}
VECTOR = Argument("x", rank=1, dtypes=("float32",), layouts=(P("data"),), values=EVERY_VALUE)


def _vector(**change: Any) -> dict[str, Any]:
    return _good(**{"arguments": [VECTOR], "out": P("data"), "rtol": 0.0, "atol": 0.0, **change})


@pytest.mark.parametrize(
    "change, why",
    [
        ({"arguments": [VECTOR, VECTOR]}, "it has 2 arguments"),
        ({"arguments": [X], "out": P("data", None)}, "its argument has rank 2"),
        ({"rtol": 1e-6}, "not exact"),
        ({"keywords": {"axis": 0}}, "keyword options"),
        (
            {"mesh": "inputs", "arguments": [dataclasses.replace(VECTOR, placements=("layouts",))]},
            "from its inputs",
        ),
        ({"arguments": [dataclasses.replace(VECTOR, values={})]}, "every value"),
    ],
)
def test_a_contract_not_of_the_one_vector_form_says_why(change: dict[str, Any], why: str) -> None:
    assert Contract(**_vector()).one_vector() is None
    assert why in str(Contract(**_vector(**change)).one_vector())


TRIPLE_CONTRACT = """
import numpy as np
from jax.sharding import PartitionSpec as P
from conformance.contracts import FULL, Argument, Contract

def tripled(x):
    with np.errstate(all="ignore"):
        return x + x + x if x.dtype.kind == "c" else np.multiply(x, x.dtype.type(3), dtype=x.dtype)

def three_times(x):  # what 3 * x compiles to for complex x: multiplication by 3+0j
    if x.dtype.kind != "c":
        return None
    a, b = x.real.copy(), x.imag.copy()
    with np.errstate(all="ignore"):
        out = np.empty_like(x)
        out.real, out.imag = a * a.dtype.type(3) - b * 0, b * b.dtype.type(3) + a * 0
    return out

TRIPLE = Contract(
    name="triple",
    arguments=[Argument("x", rank=1, dtypes=FULL.first.dtypes, layouts=(P("data"),),
                        placements=FULL.first.placements,
                        values={"allow_nan": True, "allow_infinity": True, "allow_subnormal": True})],
    mesh="keyword", mesh_optional=True, out=P("data"), oracle=tripled, accept=(three_times,),
    rtol=0.0, atol=0.0, raises=ValueError,
)
"""


@pytest.mark.slow
def test_a_contract_of_the_one_vector_form_gets_every_check(tmp_path: Path) -> None:
    """A user's own vector function (triple) is judged by pjit_double's checks, by its own oracle:
    a tripling written like the reference conforms, and the reference's doubling fails values.*."""
    (tmp_path / "triple_contract.py").write_text(TRIPLE_CONTRACT)
    source = (ROOT / "reference" / "double.py").read_text()
    tripling = source.replace(
        "return x + x if jnp.iscomplexobj(x) else 2 * x", "return x + x + x if jnp.iscomplexobj(x) else 3 * x"
    )
    assert tripling != source
    (tmp_path / "triple_impl.py").write_text(tripling)
    contract = f"{tmp_path}/triple_contract.py:TRIPLE"
    done, report = run_kit_report(
        "conformance",
        "--impl",
        f"{tmp_path}/triple_impl.py:pjit_double",
        "--contract",
        contract,
        "--hypothesis-profile",
        "ci",
    )
    assert done.returncode == 0 and verdict(report) == "conforming", done.stdout[-4000:]
    assert "state.histories" in statuses(report) and "fn.values" not in statuses(report)
    done, report = run_kit_report(
        "conformance",
        "--impl",
        "reference:pjit_double",
        "--contract",
        contract,
        "--hypothesis-profile",
        "ci",
        "--check",
        "values.float32",
    )
    assert done.returncode == 1 and statuses(report)["values.float32"] == "failed", done.stdout[-4000:]
    assert f"--contract {contract}" in done.stdout  # the rerun line names the contract as given


def test_a_declared_contracts_histories_run_first_and_pjit_doubles_order_stays() -> None:
    """fn.histories runs before the checks whose calls fill the function's caches, so that its
    failing history starts, as its replay in a fresh process does, from caches the kit left empty."""
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import ids_for, run_order
    from conformance._src.running import declared_checks  # noqa: F401

    assert run_order(True)[0] == "fn.histories" and sorted(run_order(True)) == sorted(ids_for(True))
    assert run_order(False) == ids_for(False)
