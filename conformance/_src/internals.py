"""The one door to other packages' private internals, and its self-test.

Everything the kit reads from a private attribute of pytest, pytest-xdist,
execnet, Hypothesis or JAX lives here, each behind a guard that degrades to
"unknown" (or to a slower public path) rather than to a wrong verdict when
the attribute moves.

Those a verdict rests on are also proven on the installed versions before
any check runs (``self_test``): a known compile is counted, the jit spy and
the jaxpr reader see known shardings, the global-state snapshot reads the
mesh.  A probe that fails names itself and the versions, and every check
that depends on it (``registry.Check.needs``) ends as a kit error: never
passed, never blamed on the implementation.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jax.sharding import Mesh

# The jax.monitoring event of one XLA backend compile (no public constant names it).
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


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


def move_pytest_cache(config: Any, folder: str) -> None:
    """pytest's own cache (``.pytest_cache``, written as a run ends) goes to ``folder``.

    pytest reads its ``cache_dir`` once, as it starts, and has no public way to move it later; its
    (private) ``Cache`` made for another folder takes the place of ``config.cache``.  Where that
    is not there, the cache stays where pytest put it.
    """
    if getattr(config, "cache", None) is None:
        return
    try:
        from pathlib import Path

        from _pytest.cacheprovider import Cache

        config.cache = Cache(Path(folder), config, _ispytest=True)
    except Exception:  # noqa: BLE001 -- another pytest: leave its cache alone
        return


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


@dataclass
class Execution:
    """One execution of compiled code seen by ``jit_executions``: a ``jax.jit`` call, or a call of
    an ahead-of-time ``Compiled`` executable (``jaxpr`` None: what it runs cannot be read)."""

    name: str
    in_shardings: tuple[Any, ...]
    out_shardings: tuple[Any, ...]
    in_ndims: tuple[int, ...]
    inputs: list[Any]
    outputs: list[Any]
    jaxpr: Any = None
    ahead_of_time: bool = False


def _ndim(value: Any) -> int:
    return int(getattr(value, "ndim", getattr(getattr(value, "aval", None), "ndim", 0)))


@contextmanager
def jit_executions() -> Iterator[list[Execution]]:
    """Record every jit execution in the block: its shardings, its inputs and its outputs.

    Wraps JAX's private ``pjit._pjit_call_impl_python`` (no public hook sees
    jit's in/out shardings in a real call) and the public class
    ``jax.stages.Compiled``'s ``__call__`` (an ahead-of-time executable states
    its own ``input_shardings`` and ``output_shardings``); where the private
    one is missing only executables are seen, which the jit probe reports as
    "no jit execution seen", and the check falls back to tracing.
    """
    import jax

    seen: list[Execution] = []
    compiled_class: Any = jax.stages.Compiled
    original_call: Callable[..., Any] = compiled_class.__call__

    def spy_compiled(self: Any, *args: Any, **kwargs: Any) -> Any:
        answer = original_call(self, *args, **kwargs)
        try:
            flat_in = jax.tree_util.tree_leaves((args, kwargs))
            in_shardings = tuple(jax.tree_util.tree_leaves(self.input_shardings))
            out_shardings = tuple(jax.tree_util.tree_leaves(self.output_shardings))
        except Exception:  # noqa: BLE001 -- an executable that does not say: not recorded
            return answer
        seen.append(
            Execution(
                "compiled executable",
                in_shardings,
                out_shardings,
                tuple(_ndim(a) for a in flat_in),
                list(flat_in),
                jax.tree_util.tree_leaves(answer),
                ahead_of_time=True,
            )
        )
        return answer

    try:
        from jax._src import pjit as jax_pjit

        original: Callable[..., Any] | None = jax_pjit._pjit_call_impl_python
    except (ImportError, AttributeError):
        original = None

    def spy(*flat: Any, **params: Any) -> Any:
        assert original is not None
        answer = original(*flat, **params)
        jaxpr = params["jaxpr"]
        seen.append(
            Execution(
                str(params.get("name", "?")),
                tuple(params["in_shardings"]),
                tuple(params["out_shardings"]),
                tuple(int(getattr(a, "ndim", 0)) for a in jaxpr.in_avals),
                list(flat),
                list(answer[0]),
                jaxpr,
            )
        )
        return answer

    compiled_class.__call__ = spy_compiled
    if original is not None:
        _drop_jit_dispatch_caches()
        jax_pjit._pjit_call_impl_python = spy
    try:
        yield seen
    finally:
        compiled_class.__call__ = original_call
        if original is not None:
            jax_pjit._pjit_call_impl_python = original


# -- Hypothesis ---------------------------------------------------------------------------


@contextmanager
def shrink_budget(seconds: float, stopped: str | None = None) -> Iterator[None]:
    """Hypothesis shrinks a failure for at most ``seconds`` in the block (its private engine's
    ``MAX_SHRINKING_SECONDS``, 300 s); where that attribute is missing, shrinking is unbounded.

    When the budget stops it, Hypothesis reports that it "spent more than five minutes" and asks
    to be told: false under a budget of the kit's.  Its reporter (``hypothesis.reporting``)
    then says ``stopped`` instead; Hypothesis's other reports pass as they are."""
    try:
        from hypothesis import reporting
        from hypothesis.internal.conjecture import engine
    except ImportError:
        yield
        return
    before = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if before is None:
        yield
        return
    outer = reporting.current_reporter()

    def kit_words(text: object) -> None:
        outer(stopped if stopped is not None and "working to shrink" in str(text) else text)

    engine.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        with reporting.with_reporter(kit_words):
            yield
    finally:
        engine.MAX_SHRINKING_SECONDS = before


def print_in_examples(cls: type, printer: Callable[[Any, Any, bool], None]) -> bool:
    """Have Hypothesis print instances of ``cls`` with ``printer(obj, p, cycle)`` (``p.text(...)``) in
    falsifying examples and notes; False where that cannot be done (nothing is changed then).

    Hypothesis's printer (its vendored IPython ``pretty``) takes printers for other packages'
    types by module and name (``hypothesis.vendor.pretty.for_type_by_name``, outside its
    ``__all__``); its public way, a ``_repr_pretty_`` method, would have to go on the class
    itself.  ``st.builds`` (public) shows a drawn object as the call that made it, but only where
    that call is shorter than a repr that is valid Python: a mesh of more than a dozen devices, or
    with explicit axes, would print as JAX's repr, without its device ids.
    """
    try:
        from hypothesis.vendor import pretty
    except ImportError:
        return False
    register = getattr(pretty, "for_type_by_name", None)
    table = getattr(pretty, "_deferred_type_pprinters", None)
    if not callable(register) or not isinstance(table, dict):
        return False
    key = (cls.__module__, cls.__name__)
    try:
        register(*key, printer)
    except Exception:  # noqa: BLE001 -- another signature: print as Hypothesis does
        table.pop(key, None)
        return False
    return table.get(key) is printer


def hypothesis_profile_name() -> str | None:
    """The name of the loaded Hypothesis profile (public from Hypothesis 6.139.0); None if unknown."""
    from hypothesis import settings

    public = getattr(settings, "get_current_profile_name", None)
    if public is not None:
        return str(public())
    name = getattr(settings, "_current_profile", None)
    return name if isinstance(name, str) else None


def hypothesis_profiles() -> list[str]:
    """The names of every registered Hypothesis profile, for a usage error's list; [] if unknown."""
    from hypothesis import settings

    profiles = getattr(settings, "_profiles", None)
    return sorted(profiles) if isinstance(profiles, dict) else []


# -- JAX: backend, cluster, compiles, mesh context ---------------------------------------


def backend_started() -> bool | None:
    """Whether JAX's backend is up (devices can no longer be forced); None if JAX does not say."""
    try:
        from jax._src import xla_bridge
    except ImportError:
        return None
    probe = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(probe()) if callable(probe) else None


def distributed_client() -> Any:
    """The coordination service's key-value client of ``jax.distributed``; None where not initialized."""
    from jax._src import distributed as jax_distributed

    return jax_distributed.global_state.client


class CompileCounter:
    """Counts XLA backend compiles in this process, from a ``jax.monitoring`` listener."""

    def __init__(self) -> None:
        from jax import monitoring

        self.count = 0
        self.names: list[str] = []  # each compile's function, as JAX names it ("jit(f)"; "?" if unnamed)
        monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == BACKEND_COMPILE_EVENT:
            self.count += 1
            self.names.append(str(kwargs.get("fun_name", "?")))


# The programs JAX itself compiles to move an array to another layout (device_put, jit's
# argument handling): array.py's _multi_slice, dispatch.py's _device_put_reshard, pjit.py's
# _identity_fn.  A compile of one of these is JAX's, not the implementation's.
JAX_MOVE_PROGRAMS = ("_multi_slice", "_device_put_reshard", "_identity_fn")


def is_jax_move(compiled_name: str) -> bool:
    """Whether a compile (``CompileCounter.names``) was of one of JAX's own programs for moving data."""
    return any(compiled_name in (name, f"jit({name})") for name in JAX_MOVE_PROGRAMS)


_COUNTER: CompileCounter | None = None


def compile_counter() -> CompileCounter:
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = CompileCounter()
    return _COUNTER


def mesh_context() -> dict[str, str]:
    """The calling thread's mesh context, as text: the abstract mesh and the concrete one.

    ``jax.sharding.get_mesh`` is public from JAX 0.8.1; before it the concrete
    mesh is read where JAX keeps it (``jax._src.mesh``).
    """
    import jax

    state = {"jax.sharding.get_abstract_mesh()": repr(jax.sharding.get_abstract_mesh())}
    get_mesh = getattr(jax.sharding, "get_mesh", None)
    if get_mesh is None:
        from jax._src import mesh as jax_mesh

        get_mesh = jax_mesh.get_concrete_mesh
    state["jax.sharding.get_mesh()"] = repr(get_mesh())
    state["with Mesh(...) context"] = repr(_physical_mesh())
    return state


def _physical_mesh() -> Any:
    """The mesh of a ``with Mesh(...)`` block (JAX's thread resources)."""
    from jax._src import mesh as jax_mesh

    return jax_mesh.thread_resources.env.physical_mesh


def context_mesh() -> Mesh | None:
    """The concrete mesh of the calling thread's context: ``jax.set_mesh(mesh)`` (and
    ``jax.sharding.use_mesh`` where it exists), else a ``with mesh:`` block; None where neither is.

    ``jax.sharding.get_mesh`` is public from JAX 0.8.1 (and refuses to answer under tracing);
    before it, and under tracing, the mesh is read where JAX keeps it (``jax._src.mesh``).
    """
    import jax

    found: Any = None
    get_mesh = getattr(jax.sharding, "get_mesh", None)
    try:
        found = get_mesh() if get_mesh is not None else None
    except ValueError:  # under jax.jit tracing
        found = None
    if found is None or getattr(found, "empty", True):
        try:
            from jax._src import mesh as jax_mesh

            found = jax_mesh.get_concrete_mesh()
        except (ImportError, AttributeError):
            found = None
    if found is None or getattr(found, "empty", True):
        try:
            found = _physical_mesh()
        except (ImportError, AttributeError):
            found = None
    return None if found is None or getattr(found, "empty", True) else found
