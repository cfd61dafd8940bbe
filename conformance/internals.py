"""The one door to other packages' private internals.

Everything the kit reads from a private attribute of pytest, pytest-xdist,
execnet or JAX lives here, each behind a guard that degrades to "unknown"
(or to a slower public path) rather than to a wrong verdict when the
attribute moves.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def leave_hypothesis_unrewritten() -> None:
    """Let Hypothesis's modules load as they are, not through pytest's assert rewriting.

    pytest rewrites the asserts of every module in a distribution that has a
    ``pytest11`` entry point, Hypothesis's ~90 included.  Where bytecode is not
    written (PYTHONDONTWRITEBYTECODE) that is redone on every run: ~2 s of a
    ~30 s suite.  Hypothesis's internal asserts carry no verdict; a pytest
    without this (private) attribute is left as it is.
    """
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and "hypothesis" in marked and "hypothesis" not in sys.modules:
            marked.discard("hypothesis")
            getattr(finder, "_marked_for_rewrite_cache", {}).clear()


def _worker_popen(node: Any) -> subprocess.Popen[bytes] | None:
    """The ``subprocess.Popen`` of a pytest-xdist worker (execnet's private ``_io.popen``)."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    return popen if isinstance(popen, subprocess.Popen) else None


def worker_pid(node: Any) -> int | None:
    popen = _worker_popen(node)
    return popen.pid if popen is not None else None


def worker_returncode(node: Any, *, wait: float) -> int | None:
    """The worker process's exit status (negative: the signal), waiting up to ``wait`` s; None if unknown."""
    popen = _worker_popen(node)
    if popen is None:
        return None
    try:
        return popen.wait(timeout=wait) if wait > 0 else popen.poll()
    except subprocess.TimeoutExpired:
        return None


def _drop_jit_dispatch_caches() -> None:
    """Make every jitted call take JAX's Python dispatch path once more, keeping compiled code.

    JAX's C++ dispatch caches answer a repeated call without the Python path
    where jit's parameters are visible; dropping only them costs ~1 ms per
    watched call, where ``jax.clear_caches()`` (the public fallback) drops the
    compiled executables too and every later call compiles again (~80 ms).
    """
    import jax

    try:
        from jax._src import pjit as jax_pjit
        from jax._src.lib import _jax

        jax_pjit._cpp_pjit_cache_fun_only.clear()
        jax_pjit._cpp_pjit_cache_explicit_attributes.clear()
        _jax.PjitFunctionCache.clear_all()
    except (ImportError, AttributeError):
        jax.clear_caches()


@contextmanager
def jit_executions() -> Iterator[list[tuple[dict[str, Any], list[Any]]]]:
    """Record every jit execution in the block: its parameters and its outputs.

    Wraps JAX's private ``pjit._pjit_call_impl_python`` (no public hook sees
    jit's in/out shardings in a real call); where it is missing the list stays
    empty, which the jit probe reports as "no jit execution seen", and the
    check falls back to tracing.
    """
    seen: list[tuple[dict[str, Any], list[Any]]] = []
    try:
        from jax._src import pjit as jax_pjit

        original: Callable[..., Any] = jax_pjit._pjit_call_impl_python
    except (ImportError, AttributeError):
        yield seen
        return

    def spy(*flat: Any, **params: Any) -> Any:
        answer = original(*flat, **params)
        seen.append((params, list(answer[0])))
        return answer

    _drop_jit_dispatch_caches()
    jax_pjit._pjit_call_impl_python = spy
    try:
        yield seen
    finally:
        jax_pjit._pjit_call_impl_python = original
