"""Multi-process runs on JAX's own multi-controller runtime (``jax.distributed``).

Every process runs the same suite.  To stay in lockstep they must draw the
same examples and make the same Hypothesis decisions, shrinking included:
examples are derandomized (one seed for all), and after every example the
processes agree on its verdict through the coordination service of
``jax.distributed`` before Hypothesis sees it, so a failure on one process's
shards fails the example everywhere.  The key-value store is used rather
than a device collective, so that agreeing still works -- and times out
cleanly -- when an implementation has wedged the devices.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from conformance._src import internals

# Verdict codes, ordered by severity: the worst one wins everywhere.
OK, FAILED, HUNG = 0, 1, 2


class ClusterError(RuntimeError):
    """Another process did not report in time: it died or hung outside a call."""


def initialize(
    *, coordinator: str | None, num_processes: int | None, process_id: int | None, local_devices: int | None
) -> None:
    """Join the cluster; must run before JAX's backend starts.

    Without explicit arguments ``jax.distributed.initialize`` finds its own
    (SLURM, Open MPI, Cloud TPU and GKE environments).  On CPU the processes
    talk through gloo and each gets ``local_devices`` forced host devices.
    """
    platforms = os.environ.get("JAX_PLATFORMS", "cpu")
    if platforms == "cpu":
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        if local_devices is not None:
            jax.config.update("jax_num_cpu_devices", local_devices)
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
    )


@dataclass
class Cluster:
    """This process's place in the cluster and the agreement on verdicts."""

    process_id: int
    num_processes: int
    timeout: float  # seconds to wait for the slowest process's verdict
    _step: int = field(default=0)

    @classmethod
    def current(cls, timeout: float) -> Cluster:
        return cls(jax.process_index(), jax.process_count(), timeout)

    def agree(self, verdict: int) -> list[int]:
        """Publish this process's verdict for the next step; return everyone's, in process order."""
        client = internals.distributed_client()
        if client is None:
            raise ClusterError("jax.distributed is not initialized in this process")
        self._step += 1
        key = f"conformance/verdict/{self._step}"
        client.key_value_set(f"{key}/{self.process_id}", str(verdict))
        verdicts = []
        for other in range(self.num_processes):
            try:
                value = client.blocking_key_value_get(f"{key}/{other}", int(self.timeout * 1000))
            except Exception as exc:  # noqa: BLE001 -- the runtime's deadline error
                raise ClusterError(
                    f"process {other} gave no verdict for step {self._step} within "
                    f"{self.timeout:g} s: it died or hung ({exc})"
                ) from None
            verdicts.append(int(value))
        return verdicts


# -- every ending gives a verdict: the processes' notes, and the launcher's verdict -----
# ``conformance.launch`` watches its processes as a supervisor watches a worker (supervise.py):
# each process keeps a call log and its Report's state in the folder named by this variable,
# and marks its end; a process that ends without that mark gives the check it was running a
# ``crashed`` verdict (or ``failed``, hung), and the launcher writes the table and the reports.
STATE_ENV = "CONFORMANCE_CLUSTER_STATE"


def state_dir() -> Path | None:
    """The launcher's folder for this run's notes, when a launcher watches this process."""
    folder = os.environ.get(STATE_ENV)
    return Path(folder) if folder else None


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def save_report(folder: Path, rank: int, report: Any, report_path: str | None, timeout: float) -> None:
    """This process's Report so far (a check that began and has no verdict yet is ``partial``)."""
    state = {
        name: getattr(report, name)
        for name in (
            "spec", "impl_version", "contract", "profile", "seed", "devices", "expected", "xfails",
            "backend", "device_kind", "process_count", "supervised", "schedule_seed",
        )
    }  # fmt: skip
    state["results"] = [verdict.to_dict() for verdict in report.results.values()]
    state["report_path"] = report_path
    state["timeout"] = timeout
    _atomic(folder / f"process-{rank}.report.json", json.dumps(state))


def mark_done(folder: Path, rank: int) -> None:
    """This process has written everything it will: an ending after this is no check's."""
    (folder / f"process-{rank}.done").write_text("")


@dataclass
class Ending:
    """How one process of the job ended, as the launcher saw it."""

    rank: int
    returncode: int | None
    done: bool  # it marked its end (mark_done)
    hung: bool = False  # the launcher ended it: a call past its deadline
    killed: bool = False  # the launcher ended it: another process had died
    at: float = 0.0  # when the launcher saw it end (time.time())
    done_at: float | None = None  # when it marked its end (the mark's time), if it did

    @property
    def finished_at(self) -> float:
        """When it was through: its mark of the end if it made one (a process may be ended at exit,
        after that, by what a peer did), else when it ended."""
        return self.done_at if self.done_at is not None else self.at


KIT_ERROR_STATUS, USAGE_ERROR_STATUS = 3, 4


def kit_error_first(endings: list[Ending]) -> Ending | None:
    """The process whose kit error is the job's verdict: the first to be through with exit status 3
    (KIT ERROR), if no other process ended badly (a failure, a signal, any other exit) before it.

    What its peers did after it -- a failure of an agreement step it no longer answered, a SIGABRT
    from JAX's coordination service when it left the job, an end by the launcher -- follows from
    it, and is no claim about the implementation.  None when no process ended so, or one ended
    badly before it (then that ending is the verdict: a crash or a failure).
    """
    kit = [e for e in endings if e.returncode == KIT_ERROR_STATUS]
    if not kit:
        return None
    first = min(kit, key=lambda e: (e.finished_at, e.rank))
    bad = [e for e in endings if e.returncode not in (0, 2, KIT_ERROR_STATUS)]
    return None if any(e.at < first.finished_at for e in bad) else first


def combined_status(endings: list[Ending]) -> int:
    """The job's exit status from its processes' (0 conforming, 1 not conforming, 2 partial, 3 kit
    error, 4 usage error; anything else, a signal or another exit, is an ending the launcher
    judges): 4 if any process's was a usage error; else 3 if a process's kit error came first
    (``kit_error_first``); else 1 if any ended otherwise than 0 or 2; else 2 if any was partial;
    else 0."""
    statuses = [e.returncode for e in endings]
    if not statuses:
        return 1
    if USAGE_ERROR_STATUS in statuses:
        return USAGE_ERROR_STATUS
    if kit_error_first(endings) is not None:
        return KIT_ERROR_STATUS
    if any(s not in (0, 2) for s in statuses):
        return 1
    return 2 if 2 in statuses else 0
