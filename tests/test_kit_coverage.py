"""The cells of the input space, the covering schedule, and what they reach (in this process, 8 devices)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance import strategies as cst
from conformance._src.contract import domains
from conformance._src.declared.terms import data_axis_size, named, target_sharding
from conformance._src.inputs import coverage
from conformance._src.inputs.case import NUMPY_FORMS, Case, decode, encode, make_input, may_refuse, parse
from conformance._src.inputs.coverage import LENGTHS, MESHES, PLACEMENTS, Axes, Cell, cell_of
from conformance._src.inputs.schedule import Schedule
from conformance._src.library.dtypes import carrier
from conformance._src.library.strategies import EDGE_ROOM

DEVICES = 8
FULL_CELLS = Axes().cells(named("full"), devices=DEVICES)


def _pairs(groups: set[tuple[str, str, str]]) -> set[tuple[int, str, int, str]]:
    return {(i, g[i], j, g[j]) for g in groups for i, j in ((0, 1), (0, 2), (1, 2))}


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_the_full_contract_covers_every_pair_of_dtype_mesh_and_length_each_with_every_placement(
    seed: int,
) -> None:
    cells = Axes().cells(named("full"), devices=DEVICES, seed=seed)
    groups = {(c.dtype, c.mesh, c.length) for c in cells}
    dtypes = sorted({c.dtype for c in cells})
    assert len(dtypes) == 10
    assert len(groups) == 10 * len(MESHES) == 40  # the two longest axes' product; the product has 160
    assert _pairs(groups) == {
        (i, u, j, v)
        for (i, us), (j, vs) in (
            ((0, dtypes), (1, MESHES)),
            ((0, dtypes), (2, LENGTHS)),
            ((1, MESHES), (2, LENGTHS)),
        )
        for u in us
        for v in vs
    }
    assert len(cells) == len(set(cells)) == 40 * len(PLACEMENTS)


def test_another_seed_meets_other_triples() -> None:
    def groups(seed: int) -> set[tuple[str, str, str]]:
        return {(c.dtype, c.mesh, c.length) for c in Axes().cells(named("full"), devices=DEVICES, seed=seed)}

    assert len(set().union(*(groups(seed) for seed in range(8)))) > 2 * len(groups(0))


@pytest.mark.parametrize(
    "axes",
    [
        Axes(dtypes=("float32",)),
        Axes(meshes=("default",)),
        Axes(meshes=("2d",)),
        Axes(placements=("numpy",), meshes=("1d", "2d"), lengths=("short", "medium", "long")),
    ],
    ids=["float32", "no-mesh", "2d", "indivisible"],
)
def test_a_narrowed_domain_meets_each_narrowed_value_with_every_value_of_the_others(axes: Axes) -> None:
    cells = axes.cells(named("full"), devices=DEVICES, seed=3)
    groups = {(c.dtype, c.mesh, c.length) for c in cells}
    full = {(c.dtype, c.mesh, c.length) for c in Axes().cells(named("full"), devices=DEVICES, seed=3)}
    values = [sorted({g[i] for g in groups}) for i in range(3)]
    narrowed = [i for i, v in enumerate(values) if len(v) < len({g[i] for g in full})]
    for i, j in ((0, 1), (0, 2), (1, 2)):
        if i in narrowed or j in narrowed:
            assert {(g[i], g[j]) for g in groups} == {(u, v) for u in values[i] for v in values[j]}, (i, j)
    inside = {g for g in full if all(g[i] in values[i] for i in range(3))}
    assert inside <= groups  # the design's own groups first: their compiles are shared


@pytest.mark.parametrize("seed", range(12))
def test_a_check_of_values_meets_every_edge_value_of_each_dtype_on_each_mesh_kind(seed: int) -> None:
    """By construction, not by chance: values.float32 judges float32 on every mesh kind in a
    length whose schedule values hold every edge (the largest float whose double is finite, ...),
    so a sum over a 2-D mesh's replicas that overflows near the maximum is met every run."""
    schedule = Schedule(seed)
    for axes in (Axes(dtypes=("float32",)), Axes(dtypes=("float16", "int8"))):
        cells = axes.cells(named("full"), devices=DEVICES, seed=seed)
        for dtype, mesh in {(c.dtype, c.mesh) for c in cells}:
            roomy = [c for c in cells if (c.dtype, c.mesh) == (dtype, mesh) and c.length in coverage.ROOMY]
            assert roomy, (dtype, mesh)
            values = schedule.case(roomy[0]).values
            edges = carrier(values.dtype).edges
            assert values.size >= EDGE_ROOM * edges.size
            assert set(edges.tolist()) <= set(values.view(edges.dtype).tolist()), (dtype, mesh)


def test_mesh_kinds_that_need_more_devices_leave_the_cells_on_fewer() -> None:
    on_two = Axes().cells(named("full"), devices=2)
    assert {c.mesh for c in on_two} == {"default", "1d", "2d-data1"}  # "2d" needs 4 devices
    assert {c.mesh for c in Axes().cells(named("full"), devices=1)} == {"default", "1d"}


def test_the_seed_contract_has_one_cell_per_length() -> None:
    cells = Axes().cells(named("seed"), devices=DEVICES)
    assert cells == [Cell("float32", "uncommitted", "default", length) for length in LENGTHS]


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_the_schedule_gives_every_cell_an_input_in_that_cell(seed: int) -> None:
    schedule = Schedule(seed)
    for cell in FULL_CELLS:
        case = schedule.case(cell)
        assert cell_of(case) == cell, (cell, case)
        assert case.n % data_axis_size(case.mesh) == 0
        assert case.n <= coverage.LONG_MAX


def test_the_indivisible_schedule_draws_lengths_the_data_axis_does_not_divide() -> None:
    schedule = Schedule(3)
    assert domains.INDIVISIBLE.axes is not None
    for cell in domains.INDIVISIBLE.axes.cells(named("full"), devices=DEVICES):
        case = schedule.case(cell, divisible=False)
        assert cell_of(case) == cell
        assert case.n % data_axis_size(case.mesh) != 0
        assert domains.INDIVISIBLE.accepts(case, named("full"))


@pytest.mark.parametrize("seed", [0, 7])
def test_long_vectors_pass_every_threshold_every_run(seed: int) -> None:
    """The design's long groups take the tiers in turn: a length past 4096, past 8192, past 65536
    elements, and one of 1 MiB or more, every run; all up to coverage.LONG_MAX."""
    schedule = Schedule(seed)
    cases = [
        schedule.case(cell)
        for cell in Axes().cells(named("full"), devices=DEVICES, seed=seed)
        if cell.length == "long" and cell.placement == "uncommitted"
    ]
    lengths = sorted(c.n for c in cases)
    assert lengths[0] > 4096
    for power in (2**12, 2**13, 2**16):  # each tier's lengths are next to its power of two
        assert any(abs(n - power) <= 8 for n in lengths), (power, lengths)
    assert any(c.values.nbytes >= 2**20 for c in cases), lengths
    assert max(lengths) <= coverage.LONG_MAX


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_every_dtype_meets_every_long_tier_by_construction(seed: int) -> None:
    """A long group's placements take the tiers in turn (Schedule.tier): every dtype, every placement
    and every mesh kind meets each tier every run, by construction, as every dtype meets every mesh
    kind -- one-byte integers past 65536 elements and at 1 MiB included, whatever the seed."""
    schedule = Schedule(seed)
    cells = Axes().cells(named("full"), devices=DEVICES, seed=seed)
    met = set()
    for cell in cells:
        if cell.length == "long":
            case = schedule.case(cell)
            tier = coverage.tier_of(case.n, case.dtype.itemsize)
            assert tier == schedule.tier(cell), (cell, case.n)
            met |= {(0, cell.dtype, tier), (1, cell.placement, tier), (2, cell.mesh, tier)}
            if cell.dtype in ("int8", "uint8") and tier == "1 MiB":
                assert case.n > 65536 and case.values.nbytes >= 2**20
    axes = ({c.dtype for c in cells}, set(PLACEMENTS), set(MESHES))
    assert len(axes[0]) == 10
    assert met == {(i, v, t) for i, values in enumerate(axes) for v in values for t in coverage.LONG_TIERS}


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_every_run_draws_an_input_past_32_mib_of_every_dtype(seed: int) -> None:
    """The fifth tier, every run: one input per dtype past 32 MiB (2**23 + 8 float32 elements, the
    widest dtype at 64 MiB), on every mesh kind among them, a 2-D mesh with both axes of 2+ devices
    (divisibility.no-false-error's) for a dtype at least, lengths the data axis divides."""
    dtypes, kinds, nbytes = [], set(), []
    for case in Schedule(seed).huge_cases():  # one at a time: each is dropped before the next is made
        assert case.n % data_axis_size(case.mesh) == 0
        assert case.values.nbytes > 2**25 and case.n > 2**23
        assert coverage.tier_of(case.n, case.dtype.itemsize) == "32 MiB"
        assert domains.ANY_CALL.accepts(case, named("full"))
        dtypes.append(str(case.dtype))
        kinds.add(cell_of(case).mesh)
        nbytes.append(case.values.nbytes)
        if case.dtype == np.dtype("float32"):
            assert case.n == 2**23 + 8 - (2**23 + 8) % data_axis_size(case.mesh)
        if case.dtype == np.dtype("int8"):  # the longest: its token is short and replays it exactly
            token = encode(case)
            assert len(token) < 16_000 and np.array_equal(parse(token).values, case.values)
        del case
    assert sorted(dtypes) == sorted({c.dtype for c in FULL_CELLS})
    assert kinds == set(MESHES)
    assert max(nbytes) >= 2**26
    exercise = Schedule(seed, contract=named("seed"))
    assert [(c.dtype, c.mesh_arg, c.placement) for c in exercise.huge_cases()] == [
        (np.dtype("float32"), "omit", ("uncommitted",))
    ]


def test_long_tiers_are_read_from_lengths() -> None:
    assert [coverage.tier_of(n, 4) for n in (4096, 4097, 8184, 8191, 65529, 65537, 2**18, 2**23 + 8)] == [
        None,
        "4096",
        "8192",
        "8192",
        "65536",
        "65536",
        "1 MiB",
        "32 MiB",
    ]
    assert coverage.tier_of(2**20, 1) == "1 MiB" and coverage.tier_of(2**20 - 1, 1) == "65536"
    assert coverage.tier_of(2**25 + 8, 1) == "32 MiB" and coverage.tier_of(2**23 + 8, 8) == "32 MiB"
    assert coverage.tier_of(2**23, 4) == "1 MiB"  # 32 MiB exactly is not past it


def test_cells_of_one_group_share_their_values_mesh_and_length() -> None:
    schedule = Schedule(2)
    group = [schedule.case(Cell("int8", p, "2d", "medium")) for p in PLACEMENTS]
    assert len({id(c.values) for c in group}) == 1 and len({id(c.mesh) for c in group}) == 1
    assert len({str(c.placement) for c in group}) == len(PLACEMENTS)


def test_the_schedule_is_the_same_for_one_seed_and_differs_for_another() -> None:
    cell = Cell("float32", "uncommitted", "1d", "short")
    a, b, c = Schedule(5).case(cell), Schedule(5).case(cell), Schedule(6).case(cell)
    assert encode(a) == encode(b)
    assert encode(a) != encode(c)


def test_long_vectors_have_short_tokens_that_replay_them_exactly() -> None:
    case = Schedule(1).case(Cell("complex64", "uncommitted", "default", "long"))
    values = case.values.copy()
    values[[0, case.n // 2 + 1, case.n - 1]] = values[[5, 6, 7]]  # a few others written over the block
    edited = Case(values, case.mesh, case.mesh_arg, case.placement)
    token = encode(edited)
    assert len(token) < 16_000, len(token)
    assert np.array_equal(parse(token).values.view(np.uint8), values.view(np.uint8))


@pytest.mark.parametrize("form", NUMPY_FORMS)
def test_numpy_forms_are_what_their_names_say(form: str) -> None:
    values = np.arange(12, dtype=np.float32)
    x = make_input(Case(values, placement=("numpy", form)))
    assert isinstance(x, np.ndarray)
    assert np.array_equal(x.astype(np.float32), values)
    if form == "strided":
        assert x.strides == (8,) and x.base is not None
    elif form == "reversed":
        assert x.strides == (-4,)
    elif form == "byteswapped":
        assert not x.dtype.isnative
    else:
        assert not x.flags.writeable


def test_the_target_placement_is_committed_in_the_target_layout() -> None:
    mesh = Schedule(0).mesh("2d")
    x = make_input(Case(np.arange(24, dtype=np.float32), mesh, "mesh", ("target",)))  # 24: any data axis
    assert x.committed and x.sharding.is_equivalent_to(target_sharding(mesh), 1)
    assert decode(encode(Case(np.arange(24, dtype=np.float32), mesh, "mesh", ("target",)))).placement == (
        "target",
    )


def test_only_a_non_native_byte_order_may_be_refused() -> None:
    swapped = Case(np.arange(4, dtype=np.float32), placement=("numpy", "byteswapped"))
    assert may_refuse(swapped, TypeError("Dtype >f4 is not a valid JAX array type"))
    assert not may_refuse(swapped, RuntimeError("boom"))
    assert not may_refuse(Case(np.arange(4, dtype=np.int8), placement=("numpy", "byteswapped")), TypeError())
    assert not may_refuse(Case(np.arange(4, dtype=np.float32), placement=("numpy",)), TypeError())


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_cases_restricted_to_a_cell_stay_in_it(data: st.DataObject) -> None:
    cell = data.draw(st.sampled_from(FULL_CELLS))
    case = data.draw(
        cst.cases(
            dtypes_from=[cell.dtype],
            mesh_kinds=[cell.mesh],
            placement_kinds=[cell.placement],
            max_length=4096,
        )
    )
    got = cell_of(case)
    assert (got.dtype, got.placement) == (cell.dtype, cell.placement)
    assert got.mesh == cell.mesh or (cell.mesh == "1d" and got.mesh == "1d")
    assert case.n % data_axis_size(case.mesh) == 0


def test_every_domain_with_cells_accepts_the_schedule_inputs_of_its_cells() -> None:
    schedule = Schedule(9)
    for domain in (
        domains.ANY_CALL,
        domains.FLOAT32,
        domains.DEFAULT_MESH,
        domains.EXPLICIT_MESH,
        domains.SPLIT_2D,
        domains.HISTORY_STALE,
        domains.HISTORY_COMPILE,
        domains.HISTORY_STATE,
    ):
        assert domain.axes is not None
        for cell in domain.axes.cells(named("full"), devices=len(jax.devices())):
            assert domain.accepts(schedule.case(cell), named("full")), (domain.name, cell)
