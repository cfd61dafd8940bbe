"""A fresh process of ``state.first-call``, or of a declared contract's ``fn.histories`` (fresh.py
starts it): make the devices, load the implementation, judge one history whose first call is this
process's first, and say the verdict on the last line of the output, as JSON:
``{"failure": block or null}``, or ``{"kit_error": ...}`` where the kit itself could not start."""

from __future__ import annotations

import json
import sys
from typing import Any

from conformance._src.running.fresh import CHECK, DECLARED_CHECK


def main(argv: list[str]) -> int:
    """The fresh process: make the devices, load the implementation, judge one history."""
    request = json.loads(argv[0])
    try:
        print(json.dumps({"failure": _judged(request)}), flush=True)
    except Exception as error:  # noqa: BLE001 -- the kit's own failure, said as such
        print(json.dumps({"kit_error": f"{type(error).__name__}: {error}"}), flush=True)
    return 0


def _judged(request: dict[str, Any]) -> str | None:
    from conformance._src.calling import devices

    devices.ensure_host_devices(int(request["devices"]))
    from conformance._src.calling import loader
    from conformance._src.calling.calls import ImplementationHung, Runner
    from conformance._src.contract.catalogue import CheckFailure
    from conformance._src.contract.checks import replay_first_calls
    from conformance._src.declared.contract import load
    from conformance._src.declared.terms import NAMES, named
    from conformance._src.inputs import history
    from conformance._src.inputs.case import decode_history
    from conformance._src.inputs.schedule import Schedule
    from conformance._src.running.kit import Kit
    from conformance._src.verdict import CheckVerdict

    impl = loader.load_impl(request["spec"])
    spec = request["contract"]
    contract = named(spec) if spec in NAMES else load(spec)
    declared = contract.one_vector() is not None  # a declared contract's history (fn.histories)
    kit = Kit(
        impl=impl,
        spec=request["spec"],
        contract=contract,
        contract_spec=spec,
        devices=int(request["devices"]),
        runner=Runner(timeout=float(request["call_timeout"])),
        schedule=Schedule(int(request.get("seed", 0)), contract),
    )
    check = DECLARED_CHECK if declared else CHECK
    kit.check_id = kit.running = check
    kit.records[check] = CheckVerdict(check)
    try:
        if declared:
            from conformance._src.declared import history as declared_history
            from conformance._src.running.declared_checks import replay_history

            replay_history(kit, declared_history.decode(contract, request["token"]))
            return None
        if "token" in request:
            steps = decode_history(request["token"])
        else:
            steps = history.first_calls(contract=contract, seed=int(request["seed"]))[int(request["index"])]
        replay_first_calls(kit, steps)
    except (CheckFailure, ImplementationHung) as failed:
        return str(failed)
    except Exception as error:  # noqa: BLE001 -- the implementation broke the kit's code: a failure (Kit.run_check)
        return f"{type(error).__name__}: {error}"
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
