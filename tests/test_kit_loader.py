"""The loader of ``--impl``: every way a spec can be wrong, every way it can be right.

In-process tests call ``load_impl`` directly; the end-to-end tests run
``python -m pytest conformance --impl <bad spec>`` in child processes
(started in the background by conftest.py) and look at what a user sees.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conformance._src.calling import loader
from conformance._src.calling.loader import DEFAULT_SPEC, ENV_VAR, ImplSpecError, choose_spec, load_impl

MISSING_DEPENDENCY = "kit_missing_dependency_6d1f"


@pytest.fixture
def make_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write an importable module with a fresh, unique name; return the name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def make(source: str) -> str:
        name = f"kit_impl_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(source)
        names.append(name)
        return name

    yield make
    for name in names:
        sys.modules.pop(name, None)


def _write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def _assert_one_line(error: pytest.ExceptionInfo[ImplSpecError], spec: str, *causes: str) -> str:
    message = str(error.value)
    assert "\n" not in message and "\r" not in message, message
    assert message.startswith(f"--impl {spec}: "), message
    for cause in causes:
        assert cause in message, message
    return message


# ---------------------------------------------------------------------------
# Every error, in process


@pytest.mark.parametrize("spec", ["nocolon", "reference", "reference:", ":pjit_double", ":"])
def test_a_spec_without_module_and_attribute_is_rejected(spec: str) -> None:
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(error, spec, "expected MODULE:ATTR or path/to/file.py:ATTR")


@pytest.mark.parametrize(
    "name", ["kit_no_such_module_9a7c", "kit_no_such_pkg_9a7c.sub", "reference.no_such_sub"]
)
def test_a_module_that_does_not_exist_is_not_found(name: str) -> None:
    spec = f"{name}:pjit_double"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(error, spec, f"module not found: {name!r}")


def test_a_file_that_does_not_exist_is_not_found(tmp_path: Path) -> None:
    spec = f"{tmp_path / 'missing.py'}:pjit_double"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(error, spec, "file not found", str(tmp_path / "missing.py"))


def test_a_syntax_error_in_the_file_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "broken.py", "import jax\n\ndef pjit_double(x:\n    return x\n")
    spec = f"{path}:pjit_double"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(error, spec, f"importing {path} failed", "SyntaxError", f"({path}, line 3)")


def test_an_import_error_inside_the_file_names_the_missing_module_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "needs_dep.py", f"import os\nimport {MISSING_DEPENDENCY}\n")
    spec = f"{path}:pjit_double"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(
        error,
        spec,
        f"importing {path} failed",
        f"ModuleNotFoundError: No module named '{MISSING_DEPENDENCY}'",
        f"({path}, line 2)",
    )
    assert not [m for m in sys.modules if m.startswith("_conformance_impl_needs_dep_")]


def test_an_import_error_inside_the_module_is_not_reported_as_module_not_found(make_module) -> None:
    name = make_module(f"import {MISSING_DEPENDENCY}\n")
    spec = f"{name}:pjit_double"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    message = _assert_one_line(
        error,
        spec,
        f"importing {name} failed",
        f"ModuleNotFoundError: No module named '{MISSING_DEPENDENCY}'",
    )
    assert "module not found" not in message


def test_any_exception_while_importing_becomes_one_line(make_module, tmp_path: Path) -> None:
    name = make_module('raise RuntimeError("first line\\nsecond line\\nthird line")\n')
    spec = f"{name}:pjit_double"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    message = _assert_one_line(error, spec, "RuntimeError: first line")
    assert "second line" not in message
    path = _write(tmp_path / "exits.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(ImplSpecError) as error:
        load_impl(f"{path}:pjit_double")
    _assert_one_line(error, f"{path}:pjit_double", "SystemExit: 3", f"({path}, line 2)")


@pytest.mark.parametrize("attr", ["no_such_function", "pjit_double.no_such_attribute"])
def test_a_missing_attribute_is_named(attr: str) -> None:
    spec = f"reference:{attr}"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(error, spec, f"reference has no attribute {attr!r}")


def test_an_attribute_that_raises_when_read_is_reported(make_module) -> None:
    name = make_module('def __getattr__(name):\n    raise RuntimeError(f"no {name} today")\n')
    spec = f"{name}:pjit_double"
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(error, spec, "getting pjit_double raised RuntimeError: no pjit_double today")


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("reference.double:DATA_AXIS", "str"),
        ("reference.double:_compiled", "dict"),
        ("reference:__doc__", "str"),
    ],
)
def test_an_attribute_that_is_not_callable_is_rejected(spec: str, kind: str) -> None:
    with pytest.raises(ImplSpecError) as error:
        load_impl(spec)
    _assert_one_line(error, spec, f"is a {kind}, not a callable")


# ---------------------------------------------------------------------------
# Success


IMPL_SOURCE = """
def pjit_double(x, *, mesh=None):
    return ("{tag}", x)

class Impl:
    @staticmethod
    def double(x, *, mesh=None):
        return ("{tag}-static", x)

    class Inner:
        @classmethod
        def double(cls, x, *, mesh=None):
            return ("{tag}-inner", x)

class _Callable:
    def __call__(self, x, *, mesh=None):
        return ("{tag}-object", x)

impl_object = _Callable()
"""


def test_module_attr_loads_the_function() -> None:
    import reference

    assert load_impl("reference:pjit_double") is reference.pjit_double
    assert load_impl(DEFAULT_SPEC) is reference.pjit_double
    from reference import double

    assert load_impl("reference.double:pjit_double") is double.pjit_double


@pytest.mark.parametrize(
    ("attr", "tag"),
    [
        ("pjit_double", "t"),
        ("Impl.double", "t-static"),
        ("Impl.Inner.double", "t-inner"),
        ("impl_object", "t-object"),
    ],
)
def test_file_and_module_specs_load_functions_dotted_attributes_and_callable_objects(
    attr: str, tag: str, tmp_path: Path, make_module
) -> None:
    source = IMPL_SOURCE.replace("{tag}", "t")
    path = _write(tmp_path / "sub" / "impl.py", source)
    for spec in (f"{path}:{attr}", f"{make_module(source)}:{attr}"):
        fn = load_impl(spec)
        assert callable(fn)
        assert fn(7) == (tag, 7), spec


def test_a_relative_file_path_is_resolved_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "impls" / "mine.py", IMPL_SOURCE.replace("{tag}", "rel"))
    monkeypatch.chdir(tmp_path)
    assert load_impl("impls/mine.py:pjit_double")(1) == ("rel", 1)
    monkeypatch.chdir(tmp_path / "impls")
    assert load_impl("mine.py:impl_object")(2) == ("rel-object", 2)


def test_two_files_with_the_same_name_do_not_clash(tmp_path: Path) -> None:
    a = _write(tmp_path / "a" / "impl.py", IMPL_SOURCE.replace("{tag}", "A"))
    b = _write(tmp_path / "b" / "impl.py", IMPL_SOURCE.replace("{tag}", "B"))
    fa, fb = load_impl(f"{a}:pjit_double"), load_impl(f"{b}:pjit_double")
    assert (fa(0), fb(0)) == (("A", 0), ("B", 0))
    assert fa.__module__ != fb.__module__


def test_module_version_finds_the_package_version(make_module) -> None:
    name = make_module('__version__ = "1.2.3"\ndef pjit_double(x, *, mesh=None):\n    return x\n')
    assert loader.module_version(load_impl(f"{name}:pjit_double")) == "1.2.3"
    assert loader.module_version(load_impl("reference:pjit_double")) is None


# ---------------------------------------------------------------------------
# choose_spec


def test_choose_spec_prefers_the_option_then_the_environment_then_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert DEFAULT_SPEC == "reference:pjit_double"
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert choose_spec(None) == DEFAULT_SPEC
    assert choose_spec("cli:f") == "cli:f"
    monkeypatch.setenv(ENV_VAR, "env:f")
    assert choose_spec(None) == "env:f"
    assert choose_spec("cli:f") == "cli:f"


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_option_or_variable_is_an_error_not_the_reference(
    monkeypatch: pytest.MonkeyPatch, empty: str
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(ImplSpecError, match=r"^--impl is empty: give MODULE:ATTR"):
        choose_spec(empty)
    monkeypatch.setenv(ENV_VAR, empty)
    with pytest.raises(ImplSpecError, match=rf"^{ENV_VAR} is set but empty: give MODULE:ATTR"):
        choose_spec(None)
    assert choose_spec("cli:f") == "cli:f"  # the option still comes first


# ---------------------------------------------------------------------------
# End to end: what a user sees for a bad --impl


def _e2e(kind: str, spec: str, cause: str, files: dict[str, str] | None = None) -> object:
    argv = [sys.executable, "-m", "pytest", "conformance", "-q", "--impl", spec]
    # Without the third-party plug-ins installed here (benchmark, xdist, ...) a run starts in
    # two thirds of the time; the kit's plug-in comes from the root conftest.py either way, and
    # test_kit_devices.py runs the kit with them.
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return pytest.param(
        spec, cause, id=kind, marks=pytest.mark.background(f"loader-{kind}", argv, env=env, files=files)
    )


E2E_BAD_SPECS = [
    _e2e("no-colon", "reference", "expected MODULE:ATTR"),
    _e2e("empty-attr", "reference:", "expected MODULE:ATTR"),
    _e2e(
        "module-not-found",
        "kit_no_such_module_9a7c:pjit_double",
        "module not found: 'kit_no_such_module_9a7c'",
    ),
    _e2e(
        "file-not-found", "{tmp}/kit_missing_impl.py:pjit_double", "file not found: {tmp}/kit_missing_impl.py"
    ),
    _e2e(
        "syntax-error",
        "{tmp}/kit_syntax_error.py:pjit_double",
        "SyntaxError: ",
        files={"kit_syntax_error.py": "def pjit_double(x:\n    return 2 * x\n"},
    ),
    _e2e(
        "import-error-in-file",
        "{tmp}/kit_import_error.py:pjit_double",
        f"ModuleNotFoundError: No module named '{MISSING_DEPENDENCY}' ({{tmp}}/kit_import_error.py, line 1)",
        files={"kit_import_error.py": f"import {MISSING_DEPENDENCY}\n"},
    ),
    _e2e(
        "import-error-in-module",
        "kit_broken_module:pjit_double",
        f"importing kit_broken_module failed: ModuleNotFoundError: No module named '{MISSING_DEPENDENCY}'",
        files={"kit_broken_module.py": f"import {MISSING_DEPENDENCY}\n"},
    ),
    _e2e("attribute-missing", "reference:no_such_function", "reference has no attribute 'no_such_function'"),
    _e2e("not-callable", "reference.double:DATA_AXIS", "DATA_AXIS is a str, not a callable"),
    _e2e(
        "a-class",
        "kit_impl_class:Doubler",
        "Doubler is a class: calling it makes an instance, not the doubled array",
        files={
            "kit_impl_class.py": "class Doubler:\n    def __init__(self, x, mesh=None):\n        self.x = x\n"
        },
    ),
    _e2e("two-colons", "reference:pjit_double:extra", "more than one ':'; a spec is MODULE:ATTR"),
]


@pytest.mark.parametrize(("spec", "cause"), E2E_BAD_SPECS)
def test_a_bad_impl_is_one_usage_error_line_without_traceback(
    spec: str, cause: str, bg_run, background
) -> None:
    spec = spec.replace("{tmp}", str(background.tmp))
    cause = cause.replace("{tmp}", str(background.tmp))
    assert bg_run.returncode == 4, bg_run  # pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in bg_run.output, bg_run
    lines = [line for line in bg_run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, bg_run
    assert re.fullmatch(rf"ERROR: --impl {re.escape(spec)}: .+", lines[0]), bg_run
    assert cause in lines[0], bg_run


@pytest.mark.background(
    "loader-environment",
    [sys.executable, "-m", "pytest", "conformance", "-q"],
    env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", ENV_VAR: "kit_no_such_module_9a7c:pjit_double"},
)
def test_a_bad_spec_from_the_environment_names_the_variable(bg_run) -> None:
    assert bg_run.returncode == 4, bg_run
    lines = [line for line in bg_run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, bg_run
    assert lines[0].startswith(
        f"ERROR: {ENV_VAR}=kit_no_such_module_9a7c:pjit_double (the environment variable; "
        "--impl was not given): module not found"
    ), bg_run
