"""The input space's small finite axes, their cells, and which cells each check judged.

Four axes cut the space of single calls into cells:

* ``dtype``: every dtype of the contract's domain;
* ``placement``: where x lives (``PLACEMENTS``): a NumPy array, a NumPy array
  as users also have them (a strided or reversed view, non-native byte order,
  read-only), uncommitted, committed to one device, committed elsewhere
  (split or replicated over other devices), already in the target layout, in
  another memory kind than the device's default (``pinned_host``, ...: in the
  target layout or on one device);
* ``mesh``: how the layout is asked for (``MESHES``): no mesh (the first
  device), a 1-D mesh, a 2-D mesh with both axes of 2+ devices, a 2-D mesh
  whose data axis has one device (the vector replicated over ``model``);
* ``length``: empty, short (up to 64), medium (up to 4096), long (up to 2**20 + 7: 2**20 + 1
  rounded up to a multiple of the data axis).  A long length has a tier besides (``TIERS``,
  ``tier_of``): next to 4096, 8192 or 65536 elements, or 1 MiB; a long (dtype, mesh) group's
  placements take the four in turn, so every dtype meets every tier by construction
  (schedule.Schedule.tier).  The fifth tier, past 32 MiB, is no cell: every dtype gets one input
  there every run, judged by the checks of values, layout and no false error
  (schedule.Schedule.huge_cases).

A check declares the axes it spans (``Axes``); its cells are a covering
design of them (``design``: every pair of values of two of dtype, mesh and
length meets, each with every placement), not their whole product, and the
covering schedule (``schedule``) gives every one of them an input in every
run, before Hypothesis draws the rest.  A check's verdict record
counts the inputs it judged per cell (``cell_of``), whoever drew them; the
report shows the counts and names any cell left unvisited.
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from conformance._src.declared.contract import Contract
from conformance._src.declared.terms import DATA_AXIS, dtypes_in_domain
from conformance._src.library.strategies import KIND_DEVICES

if TYPE_CHECKING:
    from jax.sharding import Mesh

    from conformance._src.inputs.case import Case, Placement

PLACEMENTS = ("numpy", "numpy-view", "uncommitted", "device", "elsewhere", "target", "memory")
MESHES = ("default", "1d", "2d", "2d-data1")
LENGTHS = ("empty", "short", "medium", "long")
SHORT_MAX = 64
MEDIUM_MAX = 4096
LONG_MAX = 2**20 + 7  # 2**20 + 1 rounded up to a multiple of a data axis of up to 8 devices
# The tiers of long lengths: next to the thresholds where implementations change path (a chunked
# loop, a kernel for packed words, offloading, a memory limit), each one past the one before.
# The cells' long lengths take the first four (Schedule.tier); the last is past 32 MiB
# (Schedule.huge_cases): 2**23 + 8 float32 elements, the widest dtype at 64 MiB or more.
TIERS = ("4096", "8192", "65536", "1 MiB", "32 MiB")
LONG_TIERS = TIERS[:4]
HUGE_BYTES = 2**25  # the last tier is past this many bytes, and past HUGE_ELEMENTS elements
HUGE_ELEMENTS = 2**23


def tier_power(tier: str, itemsize: int) -> int:
    """The threshold a tier's lengths lie next to (``Schedule.length``): a power of two of
    elements, or the elements of 1 MiB (at least 2**17) or of 32 MiB (at least 2**23)."""
    if tier == "1 MiB":
        return max(2**17, 2**20 // itemsize)
    if tier == "32 MiB":
        return max(HUGE_ELEMENTS, HUGE_BYTES // itemsize)
    return 2 ** {"4096": 12, "8192": 13, "65536": 16}[tier]


def tier_of(n: int, itemsize: int) -> str | None:
    """The tier of a long length ``n`` of elements of ``itemsize`` bytes (None: not long).  A
    tier's lengths lie within 8 of its threshold or past it (a data axis of up to 8 devices
    rounds them down), and short of the next tier's."""
    if n <= MEDIUM_MAX:
        return None
    if n > tier_power("32 MiB", itemsize):
        return "32 MiB"
    if n >= tier_power("1 MiB", itemsize):
        return "1 MiB"
    if n >= 2**16 - 8:
        return "65536"
    if n >= 2**13 - 8:
        return "8192"
    return "4096"


# The length classes whose every length (120 and up) has room for every edge value of a dtype
# (30 at most), strategies.EDGE_ROOM times over: strategies.values_from puts each one in it.
ROOMY = ("medium", "long")

# Devices a mesh kind needs (those of strategies.meshes(kind=...) as it draws them), and its name
# in messages.
MESH_DEVICES = {"default": 1, **KIND_DEVICES}
MESH_NAMES = {
    "default": "no-mesh",
    "1d": "1-D",
    "2d": "2-D (both axes of 2+ devices)",
    "2d-data1": "2-D (data axis of one device)",
}
FULL_DEVICES = max(MESH_DEVICES.values())  # the fewest devices on which every mesh kind is drawn


@dataclass(frozen=True, order=True)
class Cell:
    dtype: str
    placement: str
    mesh: str
    length: str

    def __str__(self) -> str:
        return f"{self.dtype} / {self.placement} / {self.mesh} / {self.length}"


def length_class(n: int) -> str:
    if n == 0:
        return "empty"
    if n <= SHORT_MAX:
        return "short"
    return "medium" if n <= MEDIUM_MAX else "long"


def arrived_kind(x: object, case: Case) -> str:
    """The placement class (``PLACEMENTS``) of the ``x`` that really reached the implementation,
    read from ``x`` itself: across processes an input may be made otherwise than drawn
    (case.make_input), and the coverage table says what arrived."""
    if isinstance(x, np.ndarray):
        return placement_kind(case.placement) if case.placement[0] == "numpy" else "numpy"
    if not getattr(x, "committed", True):
        return "uncommitted"
    sharding = getattr(x, "sharding", None)
    if sharding is None:
        return "numpy"  # some other array-like
    from conformance._src.declared.terms import target_sharding

    default = next(iter(sharding.device_set)).default_memory().kind
    if sharding.memory_kind not in (None, default):
        return "memory"
    if sharding.is_equivalent_to(target_sharding(case.mesh), 1):
        return "target"
    return "device" if len(sharding.device_set) == 1 else "elsewhere"


def placement_kind(placement: Placement) -> str:
    kind = placement[0]
    if kind == "numpy":
        return "numpy-view" if len(placement) > 1 else "numpy"
    if kind == "sharded":
        return "elsewhere"
    return str(kind)


def mesh_kind(mesh: Mesh | None) -> str:
    """``default``, ``1d``, ``2d``, ``2d-data1``, or ``2d-other1`` (a 2-D mesh whose other axis
    has one device: a 1-D layout with an extra name, drawn but not a cell of its own)."""
    if mesh is None:
        return "default"
    if len(mesh.axis_names) == 1:
        return "1d"
    data = int(mesh.shape[DATA_AXIS])
    other = int(np.prod([size for name, size in mesh.shape.items() if name != DATA_AXIS]))
    if other == 1:
        return "2d-other1"
    return "2d" if data >= 2 else "2d-data1"


# The mesh's own classes (``MeshClass``), beside its kind: the data axis's size, the devices'
# order, and where the data axis stands.  The schedule does not take their full product with
# the cells: each (dtype, mesh kind, length) group gets one mesh, chosen so that every pair of
# values of two axes that can meet does, the dtype aside (``schedule.mesh_variants``, ``pairs_of``).
DATA_SIZES = ("one", "power-of-two", "odd", "even-other")  # 1; 2, 4, 8; 3, 5, 7; 6
ORDERS = ("prefix", "permuted", "subset")  # jax.devices()[:k]; those in another order; others
DATA_POSITIONS = ("first", "second")  # the data axis is the mesh's first axis, or not


@dataclass(frozen=True, order=True)
class MeshClass:
    data_size: str
    order: str
    position: str

    def __str__(self) -> str:
        return f"data {self.data_size}, {self.order}, data {self.position}"


def data_size_class(size: int) -> str:
    if size == 1:
        return "one"
    if size & (size - 1) == 0:
        return "power-of-two"
    return "odd" if size % 2 else "even-other"


def device_order(ids: list[int], every: list[int]) -> str:
    """``prefix``: the first devices in order; ``permuted``: the first devices in another order;
    ``subset``: not the first ``len(ids)`` devices."""
    if ids == every[: len(ids)]:
        return "prefix"
    return "permuted" if sorted(ids) == sorted(every[: len(ids)]) else "subset"


def mesh_class(mesh: Mesh | None) -> MeshClass:
    """The mesh's class; no mesh is the first device: data one, prefix, first."""
    if mesh is None:
        return MeshClass("one", "prefix", "first")
    import jax

    ids = [int(d.id) for d in mesh.devices.flat]
    every = [int(d.id) for d in jax.devices()]
    position = "first" if mesh.axis_names[0] == DATA_AXIS else "second"
    return MeshClass(data_size_class(int(mesh.shape[DATA_AXIS])), device_order(ids, every), position)


# The axes whose pairs the schedule covers, and how to read each from a cell and a mesh class.
PAIR_AXES = ("dtype", "placement", "mesh", "length", "data size", "order", "data position")


def axis_values(cell: Cell, klass: MeshClass) -> tuple[str, ...]:
    return (cell.dtype, cell.placement, cell.mesh, cell.length, klass.data_size, klass.order, klass.position)


@functools.cache
def pairs_of(cell: Cell, klass: MeshClass) -> frozenset[tuple[str, str, str, str]]:
    """Every pair (axis, value, axis, value) that an input of ``cell`` on a ``klass`` mesh covers,
    where one of the two axes is a mesh class's (the others' pairs are the design's, ``design``),
    and the other not the dtype: a dtype meets each mesh kind once, too few for every class."""
    values = axis_values(cell, klass)
    found = set()
    for i, j in itertools.combinations(range(len(PAIR_AXES)), 2):
        if j >= 4 and i > 0:
            found.add((PAIR_AXES[i], values[i], PAIR_AXES[j], values[j]))
    return frozenset(found)


def cell_of(case: Case) -> Cell:
    return Cell(str(case.dtype), placement_kind(case.placement), mesh_kind(case.mesh), length_class(case.n))


@dataclass(frozen=True)
class Axes:
    """The cells a check judges: the values of each axis it spans (``None``: all of the axis).

    ``dtypes=("float32",)`` keeps one dtype; ``meshes=("default",)`` the calls
    without a mesh, and so on.  The seed contract has one cell per length:
    float32, uncommitted, no mesh.
    """

    dtypes: tuple[str, ...] | None = None
    placements: tuple[str, ...] | None = None
    meshes: tuple[str, ...] | None = None
    lengths: tuple[str, ...] | None = None

    def cells(self, contract: Contract, *, devices: int, x64: bool = False, seed: int = 0) -> list[Cell]:
        """The design's groups in this domain (``design``), each with every placement of the domain."""
        if not contract.takes_mesh:  # one device, no mesh: every dtype, placement and length
            return [
                Cell(str(d), p, "default", length)
                for d in dtypes_in_domain(contract, x64=x64)
                if self.dtypes is None or str(d) in self.dtypes
                for p in placement_classes(contract)
                if self.placements is None or p in self.placements
                for length in self.lengths or LENGTHS
            ]
        every = whole_space(contract, devices=devices, x64=x64)
        mine = tuple(
            [v for v in values if wanted is None or v in wanted]
            for values, wanted in zip(every, (self.dtypes, self.meshes, self.lengths), strict=True)
        )
        groups = in_domain(design(*every, seed=seed), mine, every, seed=seed)
        placements = [
            p for p in placement_classes(contract) if self.placements is None or p in self.placements
        ]
        return sorted(Cell(d, p, m, n) for d, m, n in groups for p in placements)


Group = tuple[str, str, str]  # (dtype, mesh kind, length class): the cells that share a compile

# A contract's placement kinds (Argument.placements) -> the placement classes of its cells.
PLACEMENT_CLASSES = {
    "numpy": ("numpy",),
    "numpy-forms": ("numpy-view",),
    "uncommitted": ("uncommitted",),
    "device": ("device",),
    "elsewhere": ("elsewhere",),
    "layouts": ("target",),
    "memory-kinds": ("memory",),
}


def placement_classes(contract: Contract) -> list[str]:
    """The placement classes (``PLACEMENTS``, in its order) the contract's argument comes in."""
    mine = {c for kind in contract.first.placements for c in PLACEMENT_CLASSES[kind]}
    return [p for p in PLACEMENTS if p in mine]


def whole_space(contract: Contract, *, devices: int, x64: bool = False) -> tuple[list[str], ...]:
    """Every dtype, mesh kind and length class of ``contract`` on ``devices``: ``design``'s axes."""
    return (
        [str(d) for d in dtypes_in_domain(contract, x64=x64)],
        [m for m in MESHES if MESH_DEVICES[m] <= devices and (m != "default" or contract.mesh_optional)],
        list(LENGTHS),
    )


def _room(dtype: str, mesh: str) -> tuple[int, str, int, str]:
    """What ``in_domain`` needs of a check of values: ``dtype`` on ``mesh`` in a ``ROOMY`` length
    (3 is no axis: it never equals a pair of two axes)."""
    return (3, dtype, 3, mesh)


def _group_pairs(group: Group) -> set[tuple[int, str, int, str]]:
    return {(i, group[i], j, group[j]) for i, j in itertools.combinations(range(3), 2)}


def design(dtypes: list[str], meshes: list[str], lengths: list[str], *, seed: int = 0) -> list[Group]:
    """The (dtype, mesh kind, length class) groups every run gives inputs in: every pair of
    values of two of the three axes meets in one group at least (a covering array of
    strength 2), each group with every placement.

    The two longest axes' product, the third axis's values handed out in turn
    (``(i + j) mod k``, a Latin square): the fewest groups that cover every pair,
    10 dtypes x 4 mesh kinds = 40 groups where the full product has 160, each
    its own compile.  The seed shuffles each axis first, so runs with other
    seeds meet other triples.
    """
    rng = random.Random(f"design/{seed}")
    axes = [list(dtypes), list(meshes), list(lengths)]
    for values in axes:
        rng.shuffle(values)
    if not all(axes):
        return []
    a, b, c = sorted(range(3), key=lambda i: -len(axes[i]))  # stable: ties keep the axes' order
    groups = []
    for i, first in enumerate(axes[a]):
        for j, second in enumerate(axes[b]):
            group = [""] * 3
            group[a], group[b], group[c] = first, second, axes[c][(i + j) % len(axes[c])]
            groups.append((group[0], group[1], group[2]))
    return groups


def in_domain(
    groups: list[Group], mine: tuple[list[str], ...], every: tuple[list[str], ...], *, seed: int = 0
) -> list[Group]:
    """The ``groups`` a domain of axis values ``mine`` (of ``every``) holds, and as many more of
    its own as it takes that each value of an axis it narrows meets every value of the
    others in it: a check of 2-D meshes judges every dtype and every length on them, a
    check of float32 every mesh kind and every length.  Pairs of two axes it does not
    narrow are the whole design's to cover (on a 2-D mesh, each dtype meets one length).

    A domain that narrows the dtypes (a check of values) also meets each of its dtypes on
    each of its mesh kinds in a length with room for every edge value (``ROOMY``: the
    schedule's values of such a length hold every one, ``strategies.values_from``).  So a
    bug of a value on one mesh kind (float32 near its maximum overflowing in a sum over the
    replicas of a 2-D mesh) meets that value there by construction, not by chance."""
    inside = [g for g in groups if all(g[i] in mine[i] for i in range(3))]
    narrowed = [i for i in range(3) if set(mine[i]) != set(every[i])]
    needed = {
        (i, u, j, v)
        for i, j in itertools.combinations(range(3), 2)
        if i in narrowed or j in narrowed
        for u in mine[i]
        for v in mine[j]
    }
    roomy = [length for length in mine[2] if length in ROOMY]
    if 0 in narrowed and roomy:
        needed |= {_room(d, m) for d in mine[0] for m in mine[1]}

    def covers(g: Group) -> set[tuple[int, str, int, str]]:
        return _group_pairs(g) | ({_room(g[0], g[1])} if g[2] in ROOMY else set())

    needed -= set().union(*(covers(g) for g in inside))
    candidates: list[Group] = sorted(itertools.product(mine[0], mine[1], mine[2]))
    random.Random(f"in-domain/{seed}").shuffle(candidates)
    while needed:
        best = max(candidates, key=lambda g: len(covers(g) & needed))
        inside.append(best)
        needed -= covers(best)
    return inside
