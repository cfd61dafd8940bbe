"""The loader of ``--impl``: from a spec string to the callable under test.

A spec is ``MODULE:ATTR`` (an importable module) or ``path/to/file.py:ATTR``;
ATTR may be dotted (``mod:Class.method``).  Without ``--impl`` the
``CONFORMANCE_IMPL`` environment variable is used, then the bundled reference.
Every way a spec can be wrong raises ``ImplSpecError`` with one line that
names the spec and the cause; the plug-in turns it into a usage error.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ENV_VAR = "CONFORMANCE_IMPL"
DEFAULT_SPEC = "reference:pjit_double"


class ImplSpecError(Exception):
    """A spec that does not name a callable; the message is one line."""


def choose_spec(cli_value: str | None) -> str:
    """``--impl`` first, then the environment variable, then the reference.

    Only an option or variable that is not there at all means the reference:
    one that is given but empty is an ``ImplSpecError`` (a CI variable that
    expanded to nothing must not check the reference instead).
    """
    if cli_value is not None:
        if not cli_value.strip():
            raise ImplSpecError(
                f"--impl is empty: give MODULE:ATTR or path/to/file.py:ATTR (e.g. mypkg:pjit_double), "
                f"or leave --impl out to check {DEFAULT_SPEC}"
            )
        return cli_value
    env_value = os.environ.get(ENV_VAR)
    if env_value is not None:
        if not env_value.strip():
            raise ImplSpecError(
                f"{ENV_VAR} is set but empty: give MODULE:ATTR or path/to/file.py:ATTR "
                f"(e.g. mypkg:pjit_double), or unset it to check {DEFAULT_SPEC}"
            )
        return env_value
    return DEFAULT_SPEC


def _cause(exc: BaseException) -> str:
    """One line for an exception raised while importing user code."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] + (" ..." if len(lines) > 1 else "") if lines else ""  # the message stays one line
    return f"{type(exc).__name__}: {text}{where}"


def _load_file(spec: str, path_text: str) -> ModuleType:
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise ImplSpecError(f"--impl {spec}: file not found: {path}")
    # A stable, unique module name, so two files called impl.py do not clash.
    name = f"_conformance_impl_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImplSpecError(f"--impl {spec}: cannot load {path} as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 -- any failure in user code is the cause
        del sys.modules[name]
        raise ImplSpecError(f"--impl {spec}: importing {path} failed: {_cause(exc)}") from None
    return module


def _load_module(spec: str, name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if name == missing or name.startswith(missing + "."):
            raise ImplSpecError(f"--impl {spec}: module not found: {name!r}") from None
        raise ImplSpecError(f"--impl {spec}: importing {name} failed: {_cause(exc)}") from None
    except BaseException as exc:  # noqa: BLE001
        raise ImplSpecError(f"--impl {spec}: importing {name} failed: {_cause(exc)}") from None


def load_impl(spec: str) -> Callable[..., Any]:
    """Import the module or file named by ``spec`` and return its callable."""
    where, colon, attr_path = spec.rpartition(":")
    if not colon or not where or not attr_path:
        raise ImplSpecError(
            f"--impl {spec}: expected MODULE:ATTR or path/to/file.py:ATTR (e.g. mypkg:pjit_double)"
        )
    is_file = where.endswith(".py") or os.sep in where or "/" in where
    module = _load_file(spec, where) if is_file else _load_module(spec, where)
    target: Any = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ImplSpecError(f"--impl {spec}: {where} has no attribute {attr_path!r}") from None
        except BaseException as exc:  # noqa: BLE001 -- a property that raises
            raise ImplSpecError(f"--impl {spec}: getting {attr_path} raised {_cause(exc)}") from None
    if not callable(target):
        raise ImplSpecError(f"--impl {spec}: {attr_path} is a {type(target).__name__}, not a callable")
    return target


def module_version(fn: Callable[..., Any]) -> str | None:
    """The ``__version__`` of the implementation's top-level package, if any."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if module is None:
        module = sys.modules.get(getattr(type(fn), "__module__", "") or "")
    if module is None:
        return None
    top = sys.modules.get(module.__name__.split(".")[0], module)
    version = getattr(module, "__version__", None) or getattr(top, "__version__", None)
    return str(version) if version is not None else None
