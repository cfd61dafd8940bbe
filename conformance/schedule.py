"""The covering schedule: the kit's own input for every cell of the input space, every run.

Not a Hypothesis strategy: a fixed, seeded choice per cell (``coverage.Cell``),
so that each run visits every cell whatever Hypothesis draws.  The values come
from ``strategies.values_from``, the same distribution ``strategies.values``
draws.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import jax
import numpy as np
from jax.sharding import Mesh

from conformance import coverage
from conformance.case import NUMPY_FORMS, TARGET, Case, MeshArg, Placement, make_mesh
from conformance.contract import DATA_AXIS, Contract, data_axis_size
from conformance.coverage import LONG_MAX, MEDIUM_MAX, SHORT_MAX, Cell
from conformance.strategies import OTHER_AXIS, values_from


@dataclass
class Schedule:
    """The schedule's input for every cell (``coverage.Cell``), made on demand and kept.

    Inputs of one dtype, mesh kind and length class share their mesh and
    length, whatever the placement, so that a cell costs a compile per
    (dtype, mesh, length) and not per placement.  The lengths of a class
    are the neighbours of its powers of two (2**k - 1, 2**k + 1, a multiple
    of the data axis next to them), the long ones up to 2**20 + 1.  Values
    come from ``values_from`` with a generator seeded by ``seed`` and the
    cell, so a ``ci`` run (seed 0) makes the same inputs every time.
    """

    seed: int = 0
    contract: Contract = Contract.FULL  # the seed contract calls pjit_double(x) only
    _meshes: dict[str, Mesh | None] = field(default_factory=dict)
    _cases: dict[tuple[Cell, bool], Case] = field(default_factory=dict)
    _values: dict[tuple[str, str, str, bool], np.ndarray] = field(default_factory=dict)

    def _rng(self, *parts: object) -> random.Random:
        return random.Random(f"{self.seed}/" + "/".join(map(str, parts)))

    def mesh(self, kind: str) -> Mesh | None:
        if kind not in self._meshes:
            pool = [int(d.id) for d in jax.devices()]
            rng = self._rng("mesh", kind)
            rng.shuffle(pool)
            built: Mesh | None = None
            if kind == "1d":
                size = rng.choice([k for k in (2, 3, 4, 8, len(pool)) if k <= len(pool)] or [1])
                built = make_mesh(pool[:size], (size,), (DATA_AXIS,))
            elif kind in ("2d", "2d-data1"):
                size = 4 if len(pool) < 8 else rng.choice([4, 8]) if kind == "2d" else rng.choice([2, 4, 8])
                size = min(size, len(pool))
                data = (2 if size == 4 else rng.choice([2, 4])) if kind == "2d" else 1
                names = (DATA_AXIS, OTHER_AXIS) if rng.random() < 0.5 else (OTHER_AXIS, DATA_AXIS)
                shape = (data, size // data) if names[0] == DATA_AXIS else (size // data, data)
                built = make_mesh(pool[:size], shape, names)
            self._meshes[kind] = built
        return self._meshes[kind]

    def length(self, cell: Cell, data_size: int, *, divisible: bool = True) -> int:
        """A length of the cell's class that ``data_size`` divides (or, ``divisible=False``, does not).

        Next to a power of two.  Long vectors come in four tiers, past the
        thresholds where implementations change path: past 4096 elements, past
        8192, past 65536, and 1 MiB or more; each dtype gets every tier, one per
        mesh kind (which tier goes with which kind changes with the seed).
        """
        rng = self._rng("length", cell.dtype, cell.mesh, cell.length, data_size, divisible)
        if cell.length == "empty":
            return 0
        if cell.length == "long":
            itemsize = np.dtype(jax.numpy.dtype(cell.dtype)).itemsize
            mesh_index = coverage.MESHES.index(cell.mesh) if cell.mesh in coverage.MESHES else 0
            tier = (zlib.crc32(cell.dtype.encode()) + mesh_index + self.seed) % 4
            power = [2**12, 2**13, 2**16, max(2**17, 2**20 // itemsize)][tier]
            n = power + rng.choice([1, -1] if 0 < tier < 3 else [1])
            bottom, top = MEDIUM_MAX + 1, LONG_MAX
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

        The cells of one dtype, mesh kind and length class share their values:
        only the placement differs between them.
        """
        slot = (cell, divisible)
        if slot not in self._cases:
            mesh = self.mesh(cell.mesh)
            group = (cell.dtype, cell.mesh, cell.length, divisible)
            mesh_arg: MeshArg = (
                "mesh"
                if mesh is not None
                else "omit"
                if self.contract is Contract.SEED
                else self._rng("arg", *group).choice(["omit", "none"])
            )
            n = self.length(cell, data_axis_size(mesh), divisible=divisible)
            if group not in self._values:
                dtype = np.dtype(jax.numpy.dtype(cell.dtype))
                rng = np.random.default_rng(self._rng("values", *group).getrandbits(64))
                self._values[group] = values_from(rng, dtype, n)
            placement = self._placement(cell.placement, n, mesh, self._rng("placement", cell, divisible))
            self._cases[slot] = Case(self._values[group], mesh, mesh_arg, placement)
        return self._cases[slot]

    @staticmethod
    def _placement(kind: str, n: int, mesh: Mesh | None, rng: random.Random) -> Placement:
        ids = [int(d.id) for d in jax.devices()]
        target = set(ids[:1]) if mesh is None else {int(d.id) for d in mesh.devices.flat}
        others = [i for i in ids if i not in target] or ids[::-1]
        if kind == "numpy-view":
            return ("numpy", rng.choice(NUMPY_FORMS))
        if kind == "target":
            return TARGET
        if kind == "device":
            return ("device", rng.choice(others))
        if kind == "elsewhere":
            sizes = [k for k in range(1, len(others) + 1) if n % k == 0]
            size = rng.choice(sizes)
            return ("sharded", tuple(others[:size]), rng.choice(["split", "replicated"]))
        return (kind,)
