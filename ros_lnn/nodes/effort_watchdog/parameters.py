"""The parameters of ``effort_watchdog`` (:mod:`.params`): its table and the rules tied to its
parameters."""

from __future__ import annotations

from ..input_params import diagnostics_period_parameter
from ..params import STARTUP, Param, ParameterTable


def _period_within_timeout(values: dict) -> str:
    if values["period_s"] > values["timeout_s"]:
        return "period_s must not exceed timeout_s (zeros would come later than the timeout promises)"
    return ""


#: Every parameter is read once at start-up; live sets are refused with the way to change them.
PARAMETERS = ParameterTable(
    Param(
        "timeout_s",
        0.1,
        "zeros are sent when no valid command arrived for this long [s, steady clock]",
        STARTUP,
        ge=0.001,
        le=10.0,
    ),
    Param(
        "period_s",
        0.02,
        "how often the watchdog checks, and repeats zeros while commands are missing [s]",
        STARTUP,
        ge=0.001,
        le=1.0,
    ),
    Param(
        "joints",
        [],
        "joint names of the controller, in its order (its `joints` parameter): the size of every command",
        STARTUP,
        items=str,
        unique=True,
        max_items=1024,
    ),
    diagnostics_period_parameter(STARTUP, "period of /diagnostics [s]"),
    rules=(_period_within_timeout,),
)
