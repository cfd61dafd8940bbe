"""The covering schedule: the kit's own input for every cell of the input space, every run.

Not a Hypothesis strategy: a fixed, seeded choice per cell (``coverage.Cell``),
so that each run visits every cell whatever Hypothesis draws.  The values come
from ``strategies.values_from``, the same distribution ``strategies.values``
draws.
"""

from __future__ import annotations

import functools
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import jax
import numpy as np
from jax.sharding import Mesh

from conformance._src.calling.devices import other_memory_kinds
from conformance._src.declared.contract import Contract
from conformance._src.declared.draw import NUMPY_FORMS
from conformance._src.declared.terms import DATA_AXIS, data_axis_size, dtypes_in_domain, named
from conformance._src.inputs import coverage
from conformance._src.inputs.case import (
    TARGET,
    Case,
    MeshArg,
    Placement,
)
from conformance._src.inputs.coverage import (
    DATA_POSITIONS,
    DATA_SIZES,
    LONG_MAX,
    MEDIUM_MAX,
    ORDERS,
    SHORT_MAX,
    Cell,
    MeshClass,
)
from conformance._src.library.show import make_mesh
from conformance._src.library.strategies import OTHER_AXIS, values_from

# The octaves of lengths every run gives one input (Schedule.octave_cases): (2**4, 2**5) to (2**19, 2**20).
OCTAVES = range(4, 20)

# The placements of the inputs past 32 MiB (Schedule.huge_cases), in turn: none that copies them
# to several devices (replicated elsewhere), or into a larger buffer (a strided view).
HUGE_PLACEMENTS = ("numpy", "uncommitted", "device", "target")

# Orders of the groups the mesh classes' greedy cover tries (Schedule._cover).
COVER_TRIES = 12

# The data axis's sizes of each class (coverage.DATA_SIZES).
_SIZES = {"one": (1,), "power-of-two": (2, 4, 8), "odd": (3, 5, 7), "even-other": (6,)}


def _group_pairs(klass: MeshClass, kind: str, length: str) -> set[tuple[str, ...]]:
    """The pairs a group of mesh ``kind`` and ``length`` on a ``klass`` mesh covers: each class
    value with the kind and with the length, and the class values with each other
    (coverage.pairs_of: not with the dtype)."""
    values = [("data size", klass.data_size), ("order", klass.order), ("data position", klass.position)]
    return {
        *(("length", length, axis, value) for axis, value in values),
        *(("mesh", kind, axis, value) for axis, value in values),
        (klass.data_size, klass.order),
        (klass.data_size, klass.position),
        (klass.order, klass.position),
    }


def _dims(kind: str, klass: MeshClass, devices: int) -> list[tuple[int, int]]:
    """The (data, other) axis sizes a mesh of ``kind`` and ``klass`` can have (other 0: 1-D)."""
    found = []
    for data in _SIZES[klass.data_size]:
        others = {"1d": [0], "2d": [2, 3, 4], "2d-data1": list(range(2, devices + 1))}[kind]
        for other in others:
            total = data * max(other, 1)
            if total > devices or (kind == "1d") != (other == 0):
                continue
            if (kind == "2d-data1" and data != 1) or (kind == "2d" and data < 2):
                continue
            if kind == "1d" and data == 1 and devices > 1:
                continue  # 1-D meshes of one device only where there is no other (data one: 2d-data1)
            if klass.order == "permuted" and total < 2 or klass.order == "subset" and total >= devices:
                continue
            found.append((data, other))
    return found


@functools.cache
def mesh_variants(kind: str, devices: int) -> list[MeshClass]:
    """Every mesh class a mesh of ``kind`` can have on ``devices`` devices."""
    if kind == "default":
        return [MeshClass("one", "prefix", "first")]
    positions = ("first",) if kind == "1d" else DATA_POSITIONS
    return [
        klass
        for size in DATA_SIZES
        for order in ORDERS
        for position in positions
        if _dims(kind, klass := MeshClass(size, order, position), devices)
    ]


def build_mesh(kind: str, klass: MeshClass, rng: random.Random, *, fewest: bool = False) -> Mesh:
    """A mesh of ``kind`` and ``klass`` (one of ``mesh_variants``), its sizes and devices from ``rng``;
    ``fewest``: of those with the fewest devices on the other axis (the copies of a result)."""
    every = [int(d.id) for d in jax.devices()]
    options = _dims(kind, klass, len(every))
    if fewest:
        least = min(max(other, 1) for _, other in options)
        options = [(data, other) for data, other in options if max(other, 1) == least]
    data, other = rng.choice(options)
    total = data * max(other, 1)
    if klass.order == "prefix":
        ids = every[:total]
    elif klass.order == "permuted":
        ids = every[:total]
        while ids == every[:total]:
            rng.shuffle(ids)
    else:
        ids = rng.sample(every, total)
        while sorted(ids) == every[:total]:
            ids = rng.sample(every, total)
    if other == 0:
        return make_mesh(ids, (data,), (DATA_AXIS,))
    if klass.position == "first":
        return make_mesh(ids, (data, other), (DATA_AXIS, OTHER_AXIS))
    return make_mesh(ids, (other, data), (OTHER_AXIS, DATA_AXIS))


@dataclass
class Schedule:
    """The schedule's input for every cell (``coverage.Cell``), made on demand and kept.

    Inputs of one dtype, mesh kind and length class share their mesh and
    length, whatever the placement, so that a cell costs a compile per
    (dtype, mesh, length) and not per placement (a long group: per tier).
    The lengths of a class are the neighbours of its powers of two (2**k - 1,
    2**k + 1, a multiple of the data axis next to them), the long ones up to
    2**20 + 7 (past 32 MiB: ``huge_cases``, no cell's).  Values
    come from ``values_from`` with a generator seeded by ``seed`` and the
    cell, so a ``ci`` run (seed 0) makes the same inputs every time.
    """

    seed: int = 0
    contract: Contract = field(default_factory=lambda: named("full"))  # seed: pjit_double(x) only
    _meshes: dict[str, Mesh | None] = field(default_factory=dict)
    _variants: dict[tuple[str, str, str], MeshClass] | None = None
    _cases: dict[tuple[Cell, bool], Case] = field(default_factory=dict)
    _values: dict[tuple[str, str, str, str, bool], np.ndarray] = field(default_factory=dict)
    _design: list[coverage.Group] | None = None

    def _rng(self, *parts: object) -> random.Random:
        return random.Random(f"{self.seed}/" + "/".join(map(str, parts)))

    def mesh(self, kind: str, dtype: str = "float32", length: str = "short") -> Mesh | None:
        """The mesh of the (dtype, ``kind``, length) group: of the class ``variant`` gives it."""
        slot = f"{kind}/{dtype}/{length}"
        if slot not in self._meshes:
            built: Mesh | None = None
            if kind != "default":
                klass = self.variant(kind, dtype, length)
                built = build_mesh(kind, klass, self._rng("mesh", slot))
            self._meshes[slot] = built
        return self._meshes[slot]

    def variant(self, kind: str, dtype: str, length: str) -> MeshClass:
        """The mesh class of a (dtype, ``kind``, length) group.

        Chosen once for all groups, greedily, so that every pair of values
        of two axes that can meet does (length x data size, mesh kind x
        order, data size x data position, ...): the pairs the coverage
        table counts (coverage.pairs_of).  Every group holds every
        placement, so each class meets each placement too.
        """
        if self._variants is None:
            self._variants = self._cover()
        if (kind, dtype, length) not in self._variants:  # a dtype outside the contract's: any will do
            options = mesh_variants(kind, len(jax.devices()))
            return options[zlib.crc32(f"{dtype}/{length}".encode()) % len(options)]
        return self._variants[(kind, dtype, length)]

    def design(self) -> list[coverage.Group]:
        """The whole space's groups this run (``coverage.design``), in the design's order."""
        if self._design is None:
            every = coverage.whole_space(
                self.contract, devices=len(jax.devices()), x64=bool(jax.config.read("jax_enable_x64"))
            )
            self._design = coverage.design(*every, seed=self.seed)
        return self._design

    def _cover(self) -> dict[tuple[str, str, str], MeshClass]:
        """Greedy over the groups in a shuffled order, the best of ``COVER_TRIES`` orders: the
        design's groups first (every check's cells hold them), then the rest a narrower domain
        may add (coverage.in_domain)."""
        devices = len(jax.devices())
        x64 = bool(jax.config.read("jax_enable_x64"))
        rng = self._rng("cover")
        first = [(k, d, length) for d, k, length in self.design() if k != "default"]
        rest = [
            (k, str(d), length)
            for k in coverage.MESHES
            if k != "default" and coverage.MESH_DEVICES[k] <= devices
            for d in dtypes_in_domain(self.contract, x64=x64)
            for length in coverage.LENGTHS
            if (k, str(d), length) not in first
        ]
        best: tuple[int, dict[tuple[str, str, str], MeshClass]] = (-1, {})
        for _ in range(COVER_TRIES):
            rng.shuffle(first)
            rng.shuffle(rest)
            covered: set[tuple[str, ...]] = set()
            chosen: dict[tuple[str, str, str], MeshClass] = {}
            scores = []
            for groups in (first, rest):
                for kind, dtype, length in groups:
                    options = mesh_variants(kind, devices)
                    new = {v: len(_group_pairs(v, kind, length) - covered) for v in options}
                    pick = rng.choice([v for v in options if new[v] == max(new.values())])
                    chosen[(kind, dtype, length)] = pick
                    covered |= _group_pairs(pick, kind, length)
                scores.append(len(covered))
            score = scores[0] or scores[1]  # what the design's groups cover (every check's cells hold them)
            if score > best[0]:
                best = (score, chosen)
        return best[1]

    def tier(self, cell: Cell) -> str:
        """The tier (``coverage.LONG_TIERS``) of a long cell's length.

        The placements of a long (dtype, mesh kind) group take the four tiers
        in turn (``coverage.PLACEMENTS``' order), from an offset of the group's
        own: so every dtype meets every tier, on its long group's mesh, by
        construction, as it meets every mesh kind (a group of 4 placements or
        more; the seed contract's one placement takes one tier, its octaves
        the rest).  The design's long groups take the offsets in turn, so every
        placement and every mesh kind meets every tier too; the seed changes
        which meets which.  Cells of one tier share their length and values.
        """
        longs = [(d, k) for d, k, length in self.design() if length == "long"]
        if (cell.dtype, cell.mesh) in longs:
            offset = longs.index((cell.dtype, cell.mesh)) + self.seed
        else:  # a group a narrower domain adds
            mesh_index = coverage.MESHES.index(cell.mesh) if cell.mesh in coverage.MESHES else 0
            offset = zlib.crc32(cell.dtype.encode()) + mesh_index + self.seed
        place = coverage.PLACEMENTS.index(cell.placement) if cell.placement in coverage.PLACEMENTS else 0
        return coverage.LONG_TIERS[(offset + place) % len(coverage.LONG_TIERS)]

    def length(self, cell: Cell, data_size: int, *, divisible: bool = True) -> int:
        """A length of the cell's class that ``data_size`` divides (or, ``divisible=False``, does not).

        Next to a power of two.  Long vectors come in four tiers (``tier``),
        past the thresholds where implementations change path: past 4096
        elements, next to 8192, next to 65536, and 1 MiB or more
        (``coverage.tier_power``).
        """
        tier = self.tier(cell) if cell.length == "long" else ""
        rng = self._rng("length", cell.dtype, cell.mesh, cell.length, tier, data_size, divisible)
        if cell.length == "empty":
            return 0
        if cell.length == "long":
            itemsize = np.dtype(jax.numpy.dtype(cell.dtype)).itemsize
            power = coverage.tier_power(tier, itemsize)
            n = power + rng.choice([1, -1] if tier in ("8192", "65536") else [1])
            # The 1 MiB tier stays at 1 MiB or more: a data axis of 3, 5, 6 or 7 rounds it up, past
            # 2**20 + 1 by less than the data axis (coverage.LONG_MAX).
            bottom, top = (power if tier == "1 MiB" else MEDIUM_MAX + 1), LONG_MAX
        else:
            top = {"short": SHORT_MAX, "medium": MEDIUM_MAX}[cell.length]
            bottom = {"short": 1, "medium": SHORT_MAX + 1}[cell.length]
            powers = [2**k for k in range(20 + 1) if bottom <= 2**k <= top]
            n = min(max(rng.choice(powers) + rng.choice([-1, 1]), bottom), top)
        if divisible:
            n -= n % data_size
            return n if n >= bottom else n + data_size
        if n % data_size:
            return n
        return n - 1 if n - 1 >= bottom else n + 1  # data_size >= 2 divides neither neighbour

    def case(self, cell: Cell, *, divisible: bool = True) -> Case:
        """The schedule's input for ``cell`` (a length the data axis does not divide: ``divisible=False``).

        The cells of one dtype, mesh kind and length class (and tier) share their
        values: only the placement differs between them.
        """
        slot = (cell, divisible)
        if slot not in self._cases:
            mesh = self.mesh(cell.mesh, cell.dtype, cell.length)
            tier = self.tier(cell) if cell.length == "long" else ""
            group = (cell.dtype, cell.mesh, cell.length, tier, divisible)
            mesh_arg: MeshArg = (
                "mesh"
                if mesh is not None
                else "omit"
                if not self.contract.takes_mesh
                else self._rng("arg", *group).choice(["omit", "none"])
            )
            n = self.length(cell, data_axis_size(mesh), divisible=divisible)
            if group not in self._values:
                dtype = np.dtype(jax.numpy.dtype(cell.dtype))
                rng = np.random.default_rng(self._rng("values", *group).getrandbits(64))
                self._values[group] = values_from(rng, dtype, n)
            placement = self.placement(cell.placement, n, mesh, self._rng("placement", cell, divisible))
            self._cases[slot] = Case(self._values[group], mesh, mesh_arg, placement)
        return self._cases[slot]

    def octave_cases(self) -> list[tuple[int, Case]]:
        """One input per octave of lengths, ``(2**k, 2**(k + 1))`` for k in ``OCTAVES``: a path
        for a band of lengths between the cells' tiers (a loop of fixed chunks that leaves a
        tail) meets one every run.  Each length is odd and no multiple of 5, so no multiple of
        a power of two or of ten (common chunk sizes); float32, no mesh (``mesh=None`` or
        omitted), NumPy or uncommitted.  The seed contract calls ``pjit_double(x)`` on an
        uncommitted x only."""
        made = []
        for k in OCTAVES:
            rng = self._rng("octave", k)
            n = rng.randrange(2**k + 1, 2 ** (k + 1), 2)
            n = n if n % 5 else n + 2
            values = values_from(np.random.default_rng(rng.getrandbits(64)), np.dtype("float32"), n)
            seed = not self.contract.takes_mesh
            mesh_arg: MeshArg = "omit" if seed or k % 2 else "none"
            placement: Placement = ("uncommitted",) if seed or k % 2 == 0 else ("numpy",)
            made.append((k, Case(values, None, mesh_arg, placement)))
        return made

    def huge_cases(self) -> Iterator[Case]:
        """One input past 32 MiB for every dtype of the contract, every run (``coverage.TIERS``'
        last): ``2**23 + 8`` elements of float32 (32 MiB and 32 bytes), of a wider dtype as many
        (complex64: 64 MiB), of a narrower one 32 MiB and 8 bytes (2**25 + 8 int8), rounded down
        to a multiple of the data axis.

        Made one at a time, as asked for, and kept by no one here: a run holds one such input
        (and its call) at a time.  The dtypes of 4 bytes or fewer take the mesh kinds in turn
        (every kind the devices make; on 4 devices or more a 2-D mesh with both axes of 2+
        devices, the one ``divisibility.no-false-error`` judges, for two dtypes at least), the
        wider ones the kinds that replicate nothing (no mesh, 1-D); each the class of its long
        group's mesh (``variant``), with as few devices on the other axis as that allows (2: a
        result replicated twice, not 8 times); and the placements ``HUGE_PLACEMENTS`` in turn.
        The seed shuffles all three.  The values are ``values_from``'s, a block of ``TILE``
        repeated: every edge value of the dtype, cheap to make.
        """
        x64 = bool(jax.config.read("jax_enable_x64"))
        dtypes, kinds, _ = coverage.whole_space(self.contract, devices=len(jax.devices()), x64=x64)
        kinds = kinds if self.contract.takes_mesh else ["default"]
        placements = [p for p in coverage.placement_classes(self.contract) if p in HUGE_PLACEMENTS] or [
            coverage.placement_classes(self.contract)[0]
        ]
        rng = self._rng("huge")
        for axis in (dtypes, kinds, placements):
            rng.shuffle(axis)
        plain = [k for k in kinds if k in ("default", "1d")] or kinds
        wide = [d for d in dtypes if np.dtype(jax.numpy.dtype(d)).itemsize > 4]
        narrow = [d for d in dtypes if d not in wide]
        chosen = [(d, kinds[i % len(kinds)]) for i, d in enumerate(narrow)]
        chosen += [(d, plain[i % len(plain)]) for i, d in enumerate(wide)]
        for i, (name, kind) in enumerate(chosen):
            place = placements[(i + i // len(kinds)) % len(placements)]
            mesh = None
            if kind != "default":
                mesh = build_mesh(
                    kind, self.variant(kind, name, "long"), self._rng("huge", name), fewest=True
                )
            size = data_axis_size(mesh)
            dtype = np.dtype(jax.numpy.dtype(name))
            n = coverage.tier_power("32 MiB", dtype.itemsize) + 8
            n -= n % size
            mesh_arg: MeshArg = "mesh" if mesh is not None else "omit"
            if mesh is None and self.contract.takes_mesh:
                mesh_arg = rng.choice(["omit", "none"])
            values = values_from(np.random.default_rng(self._rng("huge", name).getrandbits(64)), dtype, n)
            yield Case(values, mesh, mesh_arg, self.placement(place, n, mesh, self._rng("huge", name, place)))
            del values

    @staticmethod
    def placement(kind: str, n: int, mesh: Mesh | None, rng: random.Random) -> Placement:
        """A placement of class ``kind`` (coverage.PLACEMENTS) for a vector of ``n`` on ``mesh``."""
        ids = [int(d.id) for d in jax.devices()]
        target = set(ids[:1]) if mesh is None else {int(d.id) for d in mesh.devices.flat}
        others = [i for i in ids if i not in target] or ids[::-1]
        if kind == "numpy-view":
            return ("numpy", rng.choice(NUMPY_FORMS))
        if kind == "target":
            return TARGET
        if kind == "device":
            return ("device", rng.choice(others))
        if kind == "memory":  # on several devices where the target has several, else on one
            divides = mesh is None or n % data_axis_size(mesh) == 0  # else there is no target layout
            where = "target" if divides and (len(target) > 1 or rng.random() < 0.5) else rng.choice(ids)
            return ("memory", rng.choice(other_memory_kinds()), where)
        if kind == "elsewhere":
            sizes = [k for k in range(1, len(others) + 1) if n % k == 0]
            size = rng.choice(sizes)
            return ("sharded", tuple(others[:size]), rng.choice(["split", "replicated"]))
        return (kind,)
