"""The house's layout, read from the source: no import circles, users import only the public face,
and the library (``conformance/_src/library/``) is the bottom floor: it imports nothing of the kit
above it, only itself and ``conformance._src.internals``.

The public face is every module at the top of ``conformance/`` whose name does not start with
``_`` (``conformance/__init__.py`` names each one); everything else lives in ``conformance/_src/``
and may change without notice.  The graph is built from the source with ``ast``, every import
counted wherever it stands: at the top, inside a function, or under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "conformance"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(source: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from pkg import mod`` imports pkg.mod where that is a module, else a name of pkg.
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        else:
            continue
        for name in names:
            # ``import a.b.c`` runs a, a.b and a.b.c: the innermost known one is what it needs.
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the kit's modules it imports (its own package's ``__init__`` left out: docstrings)."""
    modules = _modules()
    known = set(modules)
    packages = {m for m, p in modules.items() if p.name == "__init__.py"}
    return {
        name: {m for m in imported(path.read_text(), known) if m != name and m not in packages}
        for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle once, as the path that closes it (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def is_private(module: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in module.split(".")[1:])


def public_modules() -> list[str]:
    return sorted(m for m in _modules() if m != "conformance" and not is_private(m))


def test_the_kit_has_no_import_circle() -> None:
    found = cycles(import_graph())
    assert not found, "import circles in conformance/: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_circle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_are_found_wherever_they_stand() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from conformance._src.running.kit import Kit\n"
        "def f():\n    from conformance._src.contract import checks\n"
        "import conformance._src.internals\n"
    )
    known = {"conformance._src.running.kit", "conformance._src.contract.checks", "conformance._src.internals"}
    assert imported(source, known | {"conformance._src.contract"}) == known


def test_the_door_to_private_internals_imports_nothing_of_the_kit() -> None:
    graph = import_graph()
    assert graph["conformance._src.internals"] == set()


def test_every_public_module_is_named_in_the_package_docstring() -> None:
    import conformance

    doc = conformance.__doc__ or ""
    for module in public_modules():
        short = module.removeprefix("conformance.")
        assert f"``{short}``" in doc, f"conformance/__init__.py does not name the public module {module}"


def test_the_public_face_exports_what_it_names() -> None:
    import importlib

    for module in public_modules():
        loaded = importlib.import_module(module)
        for name in getattr(loaded, "__all__", []):
            assert hasattr(loaded, name), f"{module}.__all__ names {name}, which it lacks"


def _readme_code() -> list[tuple[str, str]]:
    """The Python blocks of README.md and of the library's pages in docs/."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [
        (f"{page.relative_to(ROOT)} block {k}", block)
        for page in pages
        for k, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
    ]


def _example_code() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "examples").rglob("*.py"))]


@pytest.mark.parametrize(
    "where, source", _readme_code() + _example_code(), ids=lambda v: v if " " in v or "/" in v else ""
)
def test_user_code_imports_only_the_public_face(where: str, source: str) -> None:
    modules = set(_modules())
    used = imported(source, modules | {"conformance._src"})
    private = sorted(m for m in used if is_private(m))
    assert not private, f"{where} imports private modules {private}: users import only {public_modules()}"


def test_the_readme_has_code_for_the_user_code_test_to_read() -> None:
    assert len(_readme_code()) >= 1
    assert any("conformance" in source for _, source in _readme_code() + _example_code())


def library_up_arrows(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Imports from the library (the bottom floor) of anything of the kit but the library itself
    and the one door to private internals: a contract, the inputs, the engine."""
    return {
        (module, dep)
        for module, deps in graph.items()
        if module.startswith("conformance._src.library")
        for dep in deps
        if dep.startswith("conformance._src.")
        and not dep.startswith("conformance._src.library")
        and dep != "conformance._src.internals"
    }


def test_the_library_imports_nothing_of_a_contract_or_the_engine() -> None:
    found = sorted(library_up_arrows(import_graph()))
    assert not found, "the library (the bottom floor) imports from above it: " + "; ".join(
        f"{a} -> {b}" for a, b in found
    )


def test_an_arrow_up_from_the_library_is_found() -> None:
    graph = {
        "conformance._src.library.values": {"conformance._src.contract.oracle", "conformance._src.internals"},
        "conformance._src.contract.oracle": {"conformance._src.library.values"},
    }
    assert library_up_arrows(graph) == {
        ("conformance._src.library.values", "conformance._src.contract.oracle")
    }


def test_every_kind_of_arrow_up_from_the_library_is_found_and_the_door_is_not_one() -> None:
    above = {
        "conformance._src.contract.checks",
        "conformance._src.running.kit",
        "conformance._src.inputs.case",
        "conformance._src.session.setup",
    }
    allowed = {"conformance._src.internals", "conformance._src.library.y"}
    graph = {"conformance._src.library.x": above | allowed, "conformance._src.library.y": set()}
    assert library_up_arrows(graph) == {("conformance._src.library.x", dep) for dep in above}
    assert library_up_arrows({"conformance._src.library.x": allowed}) == set()


# The private rooms of conformance/_src, from the ground floor up: a room imports only from its own
# floor and the floors below it.  A new room takes its place here; an import that runs back up
# fails below.  The order is the one README.md gives, top floor first.
FLOORS = (
    "internals",  # the one door to other packages' private attributes
    "library",  # the public library's bodies: strategies and assertions
    "verdict",  # one typed record per check
    "calling",  # --impl, forced devices, calls, supervision, processes
    "declared",  # the declarations: Contract, pjit_double's seed and full, their terms
    "selftest",  # the self-test of the internals' paths
    "inputs",  # an input, the cells, the strategies, the schedule, the histories
    "contract",  # the checks, their catalogue and domains, the oracle, failure blocks
    "running",  # the engines
    "report",  # the run's report
    "session",  # the plug-in's hooks' work
)


def room(module: str) -> str | None:
    """The room of a private module (the folder or file under conformance/_src); None for the face."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "_src" else None


def arrows_up(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Imports from a room of a lower floor of a room above it; a room not in FLOORS has no floor,
    so every arrow from or to it counts."""
    floor = {name: k for k, name in enumerate(FLOORS)}
    found = set()
    for module, deps in graph.items():
        here = room(module)
        if here is None:
            continue
        for dep in deps:
            there = room(dep)
            if there is not None and floor.get(there, len(FLOORS)) > floor.get(here, -1):
                found.add((module, dep))
    return found


def test_every_private_room_has_a_floor() -> None:
    rooms = {room(m) for m in _modules()} - {None}
    assert rooms <= set(FLOORS), (
        f"rooms of conformance/_src without a floor in FLOORS: {sorted(rooms - set(FLOORS))}"
    )


def test_no_import_runs_back_up_a_floor() -> None:
    found = sorted(arrows_up(import_graph()))
    assert not found, "imports from a lower floor to a higher one: " + "; ".join(
        f"{a} -> {b}" for a, b in found
    )


def test_an_arrow_back_up_is_found_and_one_down_or_level_is_not() -> None:
    graph = {
        "conformance._src.inputs.case": {
            "conformance._src.contract.checks",  # up: the arrow to find
            "conformance._src.inputs.coverage",  # level
            "conformance._src.library.values",  # down
        },
        "conformance._src.running.kit": {"conformance._src.contract.checks"},
        "conformance.strategies": {"conformance._src.session.setup"},  # the face stands above every room
        "conformance._src.newroom.x": {"conformance._src.library.values"},  # a room without a floor
        "conformance._src.library.y": {"conformance._src.newroom.x"},
    }
    assert arrows_up(graph) == {
        ("conformance._src.inputs.case", "conformance._src.contract.checks"),
        ("conformance._src.library.y", "conformance._src.newroom.x"),
        ("conformance._src.newroom.x", "conformance._src.library.values"),
    }
