"""The probe child for a declared contract: ``--impl`` loaded, then checked against the contract.

    python -m conformance._src.declared.probe probe SPEC DEVICES ORIGIN CONTRACT

As ``calling.supervise``'s probe, and the function must be callable as the contract calls it
(its arguments in order, ``mesh=``, the keywords): else a usage error before any worker starts.
"""

from __future__ import annotations

import sys
from typing import Any

from conformance._src.calling import loader
from conformance._src.calling.supervise import _probe_main
from conformance._src.declared.contract import ContractError, check_signature, load


def main(spec: str, count: int, origin: str, contract: str) -> int:
    def check(impl: Any) -> None:
        try:
            check_signature(load(contract), impl, spec)
        except ContractError as exc:
            raise loader.ImplSpecError(exc.usage_line(contract)) from None

    return _probe_main(spec, count, origin, check)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "probe":
        sys.exit(main(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]))
    sys.exit("usage: python -m conformance._src.declared.probe probe SPEC DEVICES ORIGIN CONTRACT")
