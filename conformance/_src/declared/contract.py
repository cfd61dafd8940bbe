"""A declared contract: what a sharded function promises, as data the engine can judge.

``Contract`` and ``Argument`` are built with keyword arguments and validated when built: every
way a declaration can be wrong is one ``ContractError`` naming the field and the value
(``Contract(oracle=None)`` -> ``oracle=None: ...``).  ``load`` turns ``--contract MODULE:ATTR``
into a validated contract, checked against the function's signature and with its oracle called
once on a small input, so that a contract that cannot be judged stops the run as a usage error
(exit 4) before any check runs.  Nothing here starts JAX's backend.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from jax.sharding import PartitionSpec

from conformance._src.library.dtypes import is_x64, x64_enabled

MESH_KEYWORD = "keyword"  # the function takes mesh=...
MESH_FROM_INPUTS = "inputs"  # the mesh reaches the function through its inputs' shardings
MESH_NONE = "none"  # the function takes no mesh: its result lies on the first device
HOW_MESH = (MESH_KEYWORD, MESH_FROM_INPUTS, MESH_NONE)
NUMPY = "numpy"  # an argument given as a NumPy array (placements=)
NUMPY_FORMS_KIND = "numpy-forms"  # a NumPy array as users also have them (draw.NUMPY_FORMS)
# Where an argument may come from (Argument.placements): committed in one of its ``layouts``; a
# NumPy array; a jax.Array not committed (jnp.asarray); committed to one device; committed to
# another layout over other devices; in another memory kind of its target layout; a NumPy array
# that is a strided or reversed view, in the other byte order, or read-only.
PLACEMENT_KINDS = ("layouts", NUMPY, "uncommitted", "device", "elsewhere", "memory-kinds", NUMPY_FORMS_KIND)
DEFAULT_VALUES: Mapping[str, Any] = {
    "min_value": -100.0,
    "max_value": 100.0,
    "allow_nan": False,
    "allow_infinity": False,
    "allow_subnormal": False,
}


class _Itself:
    """``oracle=ITSELF``: the function is its own reference (``is_itself``)."""

    def __repr__(self) -> str:
        return "ITSELF"

    def __reduce__(self) -> str:
        return "ITSELF"


# The function's own result for the same inputs on one device (a mesh of the first device alone,
# each of the contract's axes of size 1) is what every other mesh and layout must give.
ITSELF: Any = _Itself()


def is_itself(oracle: object) -> bool:
    return oracle is ITSELF


class ContractError(ValueError):
    """A declared contract the kit cannot judge by: one line naming the field and the value."""

    def __init__(self, where: str, value: object, why: str) -> None:
        super().__init__(f"{where}={_short(value)}: {why}")
        self.field, self.why = where, why

    def usage_line(self, spec: str) -> str:
        """The one line of the usage error for ``--contract spec``."""
        return f"--contract {spec}: {self.why if self.field == '--contract' else self}"


def _short(value: object) -> str:
    text = getattr(value, "__qualname__", None) if callable(value) and not isinstance(value, type) else None
    text = text or repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _dtype(name: object, where: str) -> np.dtype:
    import jax.numpy as jnp

    try:
        return np.dtype(jnp.dtype(name))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ContractError(
            where, name, "not a dtype JAX has (give a name such as 'float32' or 'bfloat16')"
        ) from None


def _spec(value: object, where: str) -> PartitionSpec:
    if not isinstance(value, PartitionSpec):
        raise ContractError(where, value, "must be a jax.sharding.PartitionSpec, e.g. P('data', None)")
    return value


def spec_axes(spec: PartitionSpec) -> list[str]:
    """The mesh axis names a spec splits over, in order."""
    names: list[str] = []
    for entry in spec:
        if entry is None:
            continue
        names += list(entry) if isinstance(entry, tuple) else [entry]
    return names


class ByDtype(dict[str, Any]):
    """A value per dtype (``by_dtype``): a tolerance per dtype of the first argument, or an
    argument's value controls per dtype of that argument; a dtype it leaves out gets the default
    (the dtype's tolerance; ``DEFAULT_VALUES``)."""


def by_dtype(**per_dtype: Any) -> ByDtype:
    """``rtol=by_dtype(float32=1e-5, bfloat16={"y": 1e-2, "mean": 1e-3})``: each dtype's own
    tolerance, in any form ``rtol`` takes; ``values=by_dtype(int32={...}, float32={...})``: each
    dtype's own value controls.  The contract checks each value where it is used."""
    for name in per_dtype:
        _dtype(name, f"by_dtype({name}=...)")
    return ByDtype(per_dtype)


def _tolerance(value: object, where: str) -> None:
    """A tolerance form: None, a number or array >= 0, a pytree of them, a function of the
    arguments' values giving one of these, or ``by_dtype(...)`` of these."""
    import jax

    if isinstance(value, ByDtype):
        for name, one in value.items():
            _tolerance(one, f"{where}=by_dtype({name}=...)")
        return
    if callable(value):
        return  # its results are checked on the kit's small inputs (try_oracle), and at each use
    for leaf in jax.tree_util.tree_leaves(value):
        try:
            bound = np.asarray(leaf, dtype=np.float64)
        except (TypeError, ValueError):
            raise ContractError(
                where,
                value,
                "must be a number >= 0, an array of them, a pytree of them, a function of the "
                "arguments giving one, or by_dtype(...)",
            ) from None
        if bound.size and not (np.all(bound >= 0) and not np.any(np.isnan(bound))):
            raise ContractError(where, value, "a tolerance must be >= 0 (and not NaN)")


def tolerance_for(value: Any, dtype: np.dtype, hosts: Sequence[np.ndarray] = ()) -> Any:
    """The tolerance for a call whose first argument has ``dtype`` and whose arguments' values are
    ``hosts``: ``by_dtype``'s entry for the dtype; a function's result for those values (checked
    as a tolerance: ``ContractError`` where it is not one)."""
    if isinstance(value, ByDtype):
        value = value.get(np.dtype(dtype).name)
    if callable(value):
        value = value(*hosts)
        _tolerance(value, "a tolerance function's result")
    return value


def values_for(arg: Argument, dtype: str) -> Mapping[str, Any]:
    """The value controls ``arg`` is drawn with in ``dtype``: ``by_dtype``'s entry for it (the
    defaults where it has none), or the one set of controls for every dtype, of which an integer
    dtype takes those it has (not NaN, infinities or subnormals)."""
    if isinstance(arg.values, ByDtype):
        found = arg.values.get(np.dtype(dtype).name, None)
        return default_values(dtype) if found is None else found
    if arg.values == DEFAULT_VALUES:
        return default_values(dtype)
    if np.dtype(dtype).kind in "biu":
        return {k: v for k, v in arg.values.items() if k not in _FLOAT_ONLY}
    return arg.values


_FLOAT_ONLY = ("allow_nan", "allow_infinity", "allow_subnormal")


def default_values(dtype: str) -> Mapping[str, Any]:
    """``DEFAULT_VALUES`` as far as ``dtype`` has them: from 0 for unsigned integers, none for bool."""
    kind = np.dtype(dtype).kind
    if kind == "u":
        return {**DEFAULT_VALUES, "min_value": 0}
    if kind == "b":
        return {}
    return DEFAULT_VALUES


@dataclass(frozen=True)
class Argument:
    """One array argument of the function.

    ``rank``: its number of dimensions; or ``shape``: a function of the first argument's shape
    giving this one's (``lambda x: (x[-1],)`` for a per-feature scale; ``None`` for a side drawn
    freely: ``lambda x: (x[1], None)`` for a weight whose rows are x's columns).  ``dtypes``: the
    dtype names it comes in (for arguments after the first, ``()`` means "the first argument's").
    ``layouts``: the ``PartitionSpec``s it may be committed with, over the drawn mesh; ``"numpy"``
    among ``placements`` also gives it as a NumPy array.  ``values``: the value controls of
    ``conformance.strategies.values`` (default: finite, in [-100, 100], no subnormals), or
    ``by_dtype(...)`` of them, one set per dtype.
    """

    name: str
    rank: int | None = None
    shape: Callable[[tuple[int, ...]], tuple[int, ...]] | None = None
    dtypes: Sequence[str] = ()
    layouts: Sequence[PartitionSpec] = ()
    placements: Sequence[str] = ("layouts", NUMPY)
    values: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_VALUES))

    def __post_init__(self) -> None:
        where = f"Argument({self.name!r})"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ContractError(
                "Argument.name", self.name, "must be the argument's name, a Python identifier"
            )
        if (self.rank is None) == (self.shape is None):
            raise ContractError(f"{where}.rank", self.rank, "give exactly one of rank= and shape=")
        if self.rank is not None and (
            not isinstance(self.rank, int) or isinstance(self.rank, bool) or self.rank < 1
        ):
            raise ContractError(f"{where}.rank", self.rank, "must be an int >= 1")
        if self.shape is not None and not callable(self.shape):
            raise ContractError(
                f"{where}.shape", self.shape, "must be a function of the first argument's shape"
            )
        if isinstance(self.dtypes, str):
            raise ContractError(
                f"{where}.dtypes", self.dtypes, "must be a sequence of dtype names, e.g. ('float32',)"
            )
        object.__setattr__(self, "dtypes", tuple(_dtype(d, f"{where}.dtypes").name for d in self.dtypes))
        if (
            isinstance(self.layouts, PartitionSpec)
            or not isinstance(self.layouts, Sequence)
            or not self.layouts
        ):
            raise ContractError(
                f"{where}.layouts", self.layouts, "must be a non-empty sequence of PartitionSpecs"
            )
        object.__setattr__(self, "layouts", tuple(_spec(s, f"{where}.layouts") for s in self.layouts))
        kinds = PLACEMENT_KINDS
        if (
            isinstance(self.placements, str)
            or any(p not in kinds for p in self.placements)
            or not self.placements
        ):
            raise ContractError(
                f"{where}.placements", self.placements, f"must be a non-empty sequence of {kinds}"
            )
        object.__setattr__(self, "placements", tuple(self.placements))
        per_dtype = self.values.values() if isinstance(self.values, ByDtype) else [self.values]
        if not isinstance(self.values, Mapping) or not all(isinstance(v, Mapping) for v in per_dtype):
            raise ContractError(
                f"{where}.values",
                self.values,
                "must be a dict of value controls (min_value=...), or by_dtype(...) of them",
            )


@dataclass(frozen=True)
class Contract:
    """What a sharded function promises, for the kit to judge (``--contract MODULE:ATTR``).

    See docs/contracts.md for each field with a runnable example.
    """

    name: str
    arguments: Sequence[Argument]
    oracle: Callable[..., Any]
    out: Any  # a PartitionSpec, or a pytree of them with the result's structure
    mesh_axes: Sequence[str] = ("data",)
    mesh: str = MESH_KEYWORD
    mesh_optional: bool = False  # mesh="keyword": mesh=None or no mesh means the first device
    accept: Sequence[Callable[..., Any]] = ()  # other results a correct function may give, per element
    dtype: Callable[..., Any] | None = None  # the input dtypes -> the result's dtype(s); None: the first's
    rtol: Any = None
    atol: Any = None
    raises: type[BaseException] | None = None  # what a shape the layouts do not divide raises
    keywords: Mapping[str, Any] = field(default_factory=dict)  # static options, to the function and oracle
    min_side: int = 1
    max_side: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ContractError("name", self.name, "must be a non-empty string")
        if not callable(self.oracle) and not is_itself(self.oracle):
            raise ContractError(
                "oracle",
                self.oracle,
                "must be a NumPy function of the arguments (a callable), or ITSELF (the function's "
                "own result on one device)",
            )
        if (
            isinstance(self.arguments, Argument)
            or not isinstance(self.arguments, Sequence)
            or not self.arguments
        ):
            raise ContractError("arguments", self.arguments, "must be a non-empty sequence of Argument(...)")
        for k, arg in enumerate(self.arguments):
            if not isinstance(arg, Argument):
                raise ContractError(f"arguments[{k}]", arg, "must be an Argument(...)")
        first = self.arguments[0]
        if first.rank is None:
            raise ContractError(
                f"Argument({first.name!r}).shape", first.shape, "the first argument needs rank="
            )
        if not first.dtypes:
            raise ContractError(
                f"Argument({first.name!r}).dtypes", first.dtypes, "the first argument needs dtypes"
            )
        object.__setattr__(self, "arguments", tuple(self.arguments))
        if (
            isinstance(self.mesh_axes, str)
            or not self.mesh_axes
            or not all(isinstance(a, str) and a for a in self.mesh_axes)
        ):
            raise ContractError("mesh_axes", self.mesh_axes, "must be a non-empty sequence of axis names")
        if len(set(self.mesh_axes)) != len(self.mesh_axes):
            raise ContractError("mesh_axes", self.mesh_axes, "names an axis twice")
        object.__setattr__(self, "mesh_axes", tuple(self.mesh_axes))
        if self.mesh not in HOW_MESH:
            raise ContractError("mesh", self.mesh, f"must be one of {HOW_MESH}")
        if not isinstance(self.mesh_optional, bool) or (self.mesh_optional and self.mesh != MESH_KEYWORD):
            raise ContractError(
                "mesh_optional",
                self.mesh_optional,
                "True only with mesh='keyword' (a mesh= that may be None)",
            )
        if callable(self.accept) or not isinstance(self.accept, Sequence):
            raise ContractError("accept", self.accept, "must be a sequence of NumPy functions, like oracle")
        for k, other in enumerate(self.accept):
            if not callable(other):
                raise ContractError(f"accept[{k}]", other, "must be a NumPy function of the arguments")
        object.__setattr__(self, "accept", tuple(self.accept))
        for arg in self.arguments:
            for k, spec in enumerate(arg.layouts):
                self._axes_known(spec, f"Argument({arg.name!r}).layouts[{k}]")
            if self.mesh == MESH_FROM_INPUTS and set(arg.placements) - {"layouts", "memory-kinds"}:
                raise ContractError(
                    f"Argument({arg.name!r}).placements",
                    arg.placements,
                    "a NumPy array carries no mesh: with mesh='inputs' each argument comes committed to "
                    "one of its layouts over the mesh it brings ('layouts', 'memory-kinds'), never "
                    "NumPy, uncommitted, on one device or elsewhere",
                )
        import jax

        specs = jax.tree_util.tree_leaves(
            self.out, is_leaf=lambda v: isinstance(v, PartitionSpec) or v is None
        )
        if not specs or not all(isinstance(s, PartitionSpec) for s in specs):
            raise ContractError("out", self.out, "must be a PartitionSpec, or a pytree of them")
        for spec in specs:
            self._axes_known(spec, "out")
        _tolerance(self.rtol, "rtol")
        _tolerance(self.atol, "atol")
        if self.dtype is not None and not callable(self.dtype):
            raise ContractError("dtype", self.dtype, "must be a function of the input dtypes, or None")
        if self.raises is not None and not (
            isinstance(self.raises, type) and issubclass(self.raises, BaseException)
        ):
            raise ContractError(
                "raises", self.raises, "must be an exception class such as ValueError, or None"
            )
        if not isinstance(self.keywords, Mapping) or not all(isinstance(k, str) for k in self.keywords):
            raise ContractError("keywords", self.keywords, "must be a dict of keyword options")
        if not (
            isinstance(self.min_side, int)
            and isinstance(self.max_side, int)
            and 0 <= self.min_side <= self.max_side
            and self.max_side >= 1
        ):
            raise ContractError(
                "max_side",
                (self.min_side, self.max_side),
                "needs 0 <= min_side <= max_side, 1 <= max_side",
            )

    def _axes_known(self, spec: PartitionSpec, where: str) -> None:
        for name in spec_axes(spec):
            if name not in self.mesh_axes:
                raise ContractError(
                    where, spec, f"names mesh axis {name!r}, which mesh_axes {self.mesh_axes} lacks"
                )

    @property
    def first(self) -> Argument:
        return self.arguments[0]

    @property
    def takes_mesh(self) -> bool:
        """The function is given a mesh (``mesh="keyword"``); otherwise it finds one or needs none."""
        return self.mesh == MESH_KEYWORD

    def one_vector(self) -> str | None:
        """Why the contract is not of the one-vector form the kit's deeper checks judge (one
        argument of rank 1 laid out ``P(axis)`` and returned so, the mesh given or none), if not."""
        first = self.first
        if len(self.arguments) != 1:
            return f"it has {len(self.arguments)} arguments"
        if first.rank != 1:
            return f"its argument has rank {first.rank}"
        if len(first.layouts) != 1 or len(spec_axes(first.layouts[0])) != 1 or len(first.layouts[0]) != 1:
            return "its argument's layout is not one P(axis)"
        if self.out != first.layouts[0]:
            return "its result is not laid out as its argument"
        if first.layouts[0] != PartitionSpec("data"):
            return "its argument's layout is not P('data')"
        if self.mesh == MESH_FROM_INPUTS:
            return "its mesh comes from its inputs"
        if is_itself(self.oracle):
            return "its reference is the function itself"
        if self.dtype is not None or self.keywords:
            return "it has a dtype rule or keyword options"
        tolerances = (self.rtol, self.atol)
        if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and t == 0 for t in tolerances):
            return "its values are not exact (rtol=0, atol=0)"
        if any(not first.values.get(k) for k in ("allow_nan", "allow_infinity", "allow_subnormal")) or set(
            first.values
        ) - {"allow_nan", "allow_infinity", "allow_subnormal"}:
            return "its argument does not take every value (NaN, infinities, subnormals)"
        return None


# ---------------------------------------------------------------------------
# Loading --contract MODULE:ATTR


def load(spec: str) -> Contract:
    """The contract ``spec`` names, checked: a ``ContractError`` for every way it cannot be judged."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ContractError("--contract", spec, "give seed, full, MODULE:ATTR or path/to/file.py:ATTR")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            name = f"_conformance_contract_{path.stem}"
            loaded = importlib.util.spec_from_file_location(name, path)
            if loaded is None or loaded.loader is None or not path.exists():
                raise ContractError("--contract", spec, f"no such file {path}")
            module = importlib.util.module_from_spec(loaded)
            sys.modules[name] = module
            loaded.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ContractError:
        raise  # the contract itself, built at import, is wrong: its own field and value
    except Exception as exc:  # noqa: BLE001 -- any import failure is the user's to fix
        raise ContractError("--contract", spec, f"importing it raised {type(exc).__name__}: {exc}") from None
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ContractError("--contract", spec, f"{module_name} has no attribute {attr!r}")
        value = getattr(value, part)
    if not isinstance(value, Contract):
        raise ContractError(
            "--contract", spec, f"is a {type(value).__name__}, not a conformance.contracts.Contract"
        )
    try_oracle(value)
    check_dtypes_held(value)
    return value


def dtypes_held(arg: Argument) -> tuple[str, ...]:
    """The argument's dtypes that JAX holds in this process: its 64-bit ones (float64, int64,
    uint64, complex128) only where ``jax_enable_x64`` is on; without it JAX makes them 32-bit,
    silently, so a call on one would judge another dtype than the contract names."""
    if x64_enabled():
        return tuple(arg.dtypes)
    return tuple(name for name in arg.dtypes if not is_x64(np.dtype(name)))


def check_dtypes_held(contract: Contract) -> None:
    """A contract some argument of which has dtypes, all 64-bit, while ``jax_enable_x64`` is off,
    cannot be judged in this process."""
    for arg in contract.arguments:
        if arg.dtypes and not dtypes_held(arg):
            raise ContractError(
                f"Argument({arg.name!r}).dtypes",
                arg.dtypes,
                "every one is 64-bit, and jax_enable_x64 is off, so JAX would make them 32-bit: "
                "run with JAX_ENABLE_X64=1, or add a 32-bit dtype",
            )


def sample_shapes(contract: Contract, side: int = 4) -> list[tuple[int, ...]]:
    first = (side,) * (contract.first.rank or 1)
    return [first, *(_shape_of(a, first) for a in contract.arguments[1:])]


def tied_shape(arg: Argument, first: tuple[int, ...]) -> tuple[int | None, ...]:
    """``arg.shape`` of the first argument's shape: each side an int, or None where it is free."""
    assert arg.shape is not None
    return tuple(None if s is None else int(s) for s in arg.shape(first))


def _shape_of(arg: Argument, first: tuple[int, ...]) -> tuple[int, ...]:
    if arg.shape is not None:
        try:
            shape = tuple(first[0] if s is None else s for s in tied_shape(arg, first))
        except Exception as exc:  # noqa: BLE001 -- the user's function
            raise ContractError(
                f"Argument({arg.name!r}).shape", arg.shape, f"raised {type(exc).__name__}: {exc}"
            ) from None
        return shape
    return (first[0],) * (arg.rank or 1)


def try_oracle(contract: Contract) -> None:
    """Call the oracle once on small finite inputs: one that raises, or whose result is not of
    ``out``'s pytree structure (one array per spec), cannot judge anything."""
    import jax

    shapes = sample_shapes(contract)
    dtype = np.dtype(contract.first.dtypes[0])
    args = [np.linspace(-1.0, 1.0, num=int(np.prod(s))).reshape(s).astype(dtype) for s in shapes]
    _try_tolerances(contract, args, dtype, shapes)
    if is_itself(contract.oracle):
        return  # the function's own result: its calls will tell
    try:
        expected = contract.oracle(*args, **contract.keywords)
    except Exception as exc:  # noqa: BLE001 -- the user's oracle
        raise ContractError(
            "oracle",
            contract.oracle,
            f"raised {type(exc).__name__}: {exc} on {dtype.name} inputs of shapes {shapes}",
        ) from None
    want = jax.tree_util.tree_structure(contract.out, is_leaf=lambda v: isinstance(v, PartitionSpec))
    got = jax.tree_util.tree_structure(expected)
    if str(got) != str(want):
        raise ContractError(
            "oracle",
            contract.oracle,
            f"returns a pytree of structure {got} on {dtype.name} inputs of shapes {shapes}, but out "
            f"has {want}: the oracle gives one array per out spec",
        )


def _try_tolerances(contract: Contract, args: list[np.ndarray], dtype: np.dtype, shapes: Any) -> None:
    """Each tolerance function, on the same small inputs: one that raises or gives no tolerance
    cannot judge anything."""
    for name in ("rtol", "atol"):
        try:
            tolerance_for(getattr(contract, name), dtype, args)
        except ContractError as exc:
            raise ContractError(
                name, getattr(contract, name), f"{exc.why} on the kit's small inputs"
            ) from None
        except Exception as exc:  # noqa: BLE001 -- the user's tolerance function
            raise ContractError(
                name,
                getattr(contract, name),
                f"raised {type(exc).__name__}: {exc} on {dtype.name} inputs of shapes {shapes}",
            ) from None


def signature_problem(contract: Contract, impl: Callable[..., Any]) -> str | None:
    """Why the function cannot be called as the contract calls it (its arguments in order,
    ``mesh=`` where the contract hands one over, its keywords), as ``f(x, mesh=...): why``; None
    where it can, or where Python cannot say (a builtin: its calls will tell)."""
    try:
        signature = inspect.signature(impl)
    except (TypeError, ValueError):
        return None
    args = [object() for _ in contract.arguments]
    kwargs = dict(contract.keywords)
    if contract.mesh == MESH_KEYWORD:
        kwargs["mesh"] = object()
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        called = ", ".join([a.name for a in contract.arguments] + [f"{k}=..." for k in kwargs])
        return f"f({called}): {exc}"
    return None
