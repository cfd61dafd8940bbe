"""Each check's input domain, declared in one place: what it draws, reuses, and covers.

A ``Domain`` says, for the checks that judge it:

* ``draw``: the Hypothesis strategy of fresh inputs (built when the check
  runs, when the devices are there to count);
* ``accepts``: which single inputs belong to it.  The same predicate says
  which earlier checks' inputs the check may judge too (pool.py) and which
  ``--case`` tokens a replay of the check may bring (options.py);
* ``axes``: the cells of the covering schedule (coverage.py) the check
  judges in every run, before Hypothesis draws the rest; ``None`` for
  domains the schedule does not cover;
* ``divisible``: whether the schedule's lengths are multiples of the data
  axis (``False`` for the divisibility error);
* ``shared``: the check judges one call on its own, so the schedule's calls
  are shared: one pass over the cells calls each input once and every such
  check judges it there and then (kit.py), instead of a call per check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st
from jax.sharding import Mesh

from conformance._src.declared.contract import Contract
from conformance._src.declared.terms import data_axis_size
from conformance._src.inputs import strategies as cst
from conformance._src.inputs.case import Case
from conformance._src.inputs.coverage import PLACEMENTS, Axes


@dataclass(frozen=True)
class Domain:
    name: str
    draw: Callable[[Contract], st.SearchStrategy[Case]]
    accepts: Callable[[Case, Contract], bool]
    axes: Axes | None = None
    divisible: bool = True
    shared: bool = False


# ---------------------------------------------------------------------------
# Predicates: which single inputs belong to a domain


def _divisible(case: Case, _: Contract) -> bool:
    """x anywhere, a length the data axis divides."""
    return isinstance(case, Case) and case.n % data_axis_size(case.mesh) == 0


def _float32(case: Case, contract: Contract) -> bool:
    return _divisible(case, contract) and case.dtype == np.dtype("float32")


def _default_mesh(case: Case, contract: Contract) -> bool:
    return _divisible(case, contract) and case.mesh_arg != "mesh"


def _explicit_mesh(case: Case, contract: Contract) -> bool:
    return _divisible(case, contract) and case.mesh_arg == "mesh"


def _split_2d(case: Case, contract: Contract) -> bool:
    """A 2-D mesh with both axes of 2+ devices (full contract); float32 (seed)."""
    if not contract.takes_mesh:
        return _float32(case, contract)
    mesh = case.mesh if isinstance(case, Case) else None  # a Mesh, or an AbstractMesh (options.py)
    split = mesh is not None and len(mesh.axis_names) == 2 and min(mesh.shape.values()) >= 2
    return _divisible(case, contract) and split


def _indivisible(case: Case, _: Contract) -> bool:
    """A mesh whose data axis does not divide the length, x anywhere."""
    return isinstance(case, Case) and case.mesh_arg == "mesh" and case.n % data_axis_size(case.mesh) != 0


# ---------------------------------------------------------------------------
# Strategies


def _cases(contract: Contract, **options: Any) -> st.SearchStrategy[Case]:
    """The library's ``cases`` over the devices the kit has, one of them too: the kit itself says what a
    run on too few devices leaves out (kit.py), where a user's test would be refused one device."""
    return cst.cases(contract=contract, devices=jax.devices(), **options)


def _placed(contract: Contract) -> st.SearchStrategy[Case]:
    return _cases(contract, any_placement=contract.takes_mesh)


def _placed_float32(contract: Contract) -> st.SearchStrategy[Case]:
    return _cases(contract, dtypes_from=["float32"], any_placement=contract.takes_mesh)


def _placed_default_mesh(contract: Contract) -> st.SearchStrategy[Case]:
    if not contract.takes_mesh:
        return _cases(contract)
    return _cases(contract, mesh_args=("omit", "none"), any_placement=True)


def _on_meshes(contract: Contract, meshes: st.SearchStrategy[Mesh]) -> st.SearchStrategy[Case]:
    """Cases passed one of ``meshes``, x anywhere, the length cut to a multiple of its data axis."""

    def fit(case: Case, mesh: Mesh) -> Case:
        n = case.n - case.n % data_axis_size(mesh)
        placement = case.placement
        if placement[0] == "sharded" and placement[2] == "split" and n % len(placement[1]):
            placement = ("sharded", placement[1], "replicated")
        return Case(case.values[:n], mesh, "mesh", placement)

    return st.builds(fit, _cases(contract, mesh_args=("mesh",), any_placement=True), meshes)


SPLIT_2D_DEVICES = 4  # the smallest mesh with two axes of 2+ devices


def _placed_explicit_mesh(contract: Contract) -> st.SearchStrategy[Case]:
    # Any mesh, or (as often) one whose two axes both have several devices: a
    # layout over the wrong axis, or over every device, shows only there.
    any_mesh = _cases(contract, mesh_args=("mesh",), any_placement=True)
    if len(jax.devices()) < SPLIT_2D_DEVICES:
        return any_mesh  # no such mesh on fewer devices: any mesh there is
    return st.one_of(any_mesh, _on_meshes(contract, cst.meshes(kind="2d")))


def _placed_indivisible(contract: Contract) -> st.SearchStrategy[Case]:
    return _cases(contract, divisible=False, any_placement=True)


def _placed_split_2d(contract: Contract) -> st.SearchStrategy[Case]:
    if not contract.takes_mesh:
        return _cases(contract, dtypes_from=["float32"])
    # The data axis is a strict part of the mesh: a length the data axis
    # divides but the whole mesh does not is the classic trap.
    return _on_meshes(contract, cst.meshes(kind="2d"))


# ---------------------------------------------------------------------------
# The domains

MESHES_GIVEN = ("1d", "2d", "2d-data1")

# One call judged on its own: any dtype, placement, mesh and length the data axis divides.
ANY_CALL = Domain("any call", _placed, _divisible, Axes(), shared=True)
FLOAT32 = Domain("float32 calls", _placed_float32, _float32, Axes(dtypes=("float32",)), shared=True)
DEFAULT_MESH = Domain(
    "calls without a mesh", _placed_default_mesh, _default_mesh, Axes(meshes=("default",)), shared=True
)
EXPLICIT_MESH = Domain(
    "calls with a mesh", _placed_explicit_mesh, _explicit_mesh, Axes(meshes=MESHES_GIVEN), shared=True
)
SPLIT_2D = Domain(
    "calls on a 2-D mesh with both axes of 2+ devices",
    _placed_split_2d,
    _split_2d,
    Axes(meshes=("2d",)),
    shared=True,
)
INDIVISIBLE = Domain(
    "calls whose length the data axis does not divide",
    _placed_indivisible,
    _indivisible,
    Axes(
        placements=tuple(p for p in PLACEMENTS if p != "target"),  # no target layout exists
        meshes=("1d", "2d"),  # a data axis of 2+ devices
        lengths=("short", "medium", "long"),
    ),
    divisible=False,
)
# Histories of calls cost a compile per new mesh or dtype: their cells are fewer.
HISTORY_STALE = Domain(
    "histories after a call",
    _placed,
    _divisible,
    Axes(dtypes=("float32",), placements=("numpy", "uncommitted"), lengths=("short", "long")),
)
HISTORY_COMPILE = Domain(
    "histories of calls", _placed, _divisible, Axes(dtypes=("float32",), lengths=("short",))
)
HISTORY_STATE = Domain(
    "calls between two looks at JAX's state",
    _placed,
    _divisible,
    Axes(dtypes=("float32",), placements=("uncommitted",), lengths=("short",)),
)
