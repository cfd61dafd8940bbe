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
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ImplRequest:
    """The implementation a run asked for: its spec, and where the spec came from."""

    spec: str  # MODULE:ATTR or path/to/file.py:ATTR
    origin: str  # "--impl", or ENV_VAR: what messages name (spec_label)


def requested(cli_value: str | None) -> ImplRequest:
    """``--impl``'s value, else the environment variable's, else the reference (``choose_spec``)."""
    return ImplRequest(choose_spec(cli_value), spec_origin(cli_value))


def spec_origin(cli_value: str | None) -> str:
    """Where ``choose_spec`` found the spec: ``--impl``, or the environment variable's name."""
    if cli_value is None and os.environ.get(ENV_VAR) is not None:
        return ENV_VAR
    return "--impl"


def spec_label(spec: str, origin: str = "--impl") -> str:
    """How messages name the spec: ``--impl SPEC``, or ``CONFORMANCE_IMPL=SPEC (the environment
    variable)`` where it came from there, so that the user knows what to fix."""
    if origin == ENV_VAR:
        return f"{ENV_VAR}={spec} (the environment variable; --impl was not given)"
    return f"--impl {spec}"


def _cause(exc: BaseException) -> str:
    """One line for an exception raised while importing user code."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] + (" ..." if len(lines) > 1 else "") if lines else ""  # the message stays one line
    return f"{type(exc).__name__}: {text}{where}"


def _load_file(label: str, path_text: str) -> ModuleType:
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise ImplSpecError(f"{label}: file not found: {path}")
    # A stable, unique module name, so two files called impl.py do not clash.
    name = f"_conformance_impl_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImplSpecError(f"{label}: cannot load {path} as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 -- any failure in user code is the cause
        del sys.modules[name]
        raise ImplSpecError(f"{label}: importing {path} failed: {_cause(exc)}") from None
    return module


def _load_module(label: str, name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if name == missing or name.startswith(missing + "."):
            raise ImplSpecError(f"{label}: module not found: {name!r}") from None
        raise ImplSpecError(f"{label}: importing {name} failed: {_cause(exc)}") from None
    except BaseException as exc:  # noqa: BLE001
        raise ImplSpecError(f"{label}: importing {name} failed: {_cause(exc)}") from None


def load_impl(spec: str, origin: str = "--impl") -> Callable[..., Any]:
    """Import the module or file named by ``spec`` and return its callable (not a class).

    ``origin`` (``spec_origin``) is where the spec came from, for the messages.
    """
    label = spec_label(spec, origin)
    where, colon, attr_path = spec.rpartition(":")
    if not colon or not where or not attr_path:
        raise ImplSpecError(f"{label}: expected MODULE:ATTR or path/to/file.py:ATTR (e.g. mypkg:pjit_double)")
    is_file = where.endswith(".py") or os.sep in where or "/" in where
    if not is_file and ":" in where:
        raise ImplSpecError(
            f"{label}: more than one ':'; a spec is MODULE:ATTR or path/to/file.py:ATTR, one ':' before "
            f"the attribute (dots for an attribute's attribute: mypkg:obj.method)"
        )
    module = _load_file(label, where) if is_file else _load_module(label, where)
    target: Any = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ImplSpecError(f"{label}: {where} has no attribute {attr_path!r}") from None
        except BaseException as exc:  # noqa: BLE001 -- a property that raises
            raise ImplSpecError(f"{label}: getting {attr_path} raised {_cause(exc)}") from None
    if not callable(target):
        raise ImplSpecError(f"{label}: {attr_path} is a {type(target).__name__}, not a callable")
    if inspect.isclass(target):
        raise ImplSpecError(
            f"{label}: {attr_path} is a class: calling it makes an instance, not the doubled array; "
            f"name a function, a callable instance or a method (mypkg:obj.method)"
        )
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
