"""The parameters the arm simulators share (``dac_chain_sim``, ``arm_sim``): where the joints start, how
effort commands age, and lockstep with a controller on simulated time. Each is read once at start-up."""

from __future__ import annotations

from .params import STARTUP, Param

COMMAND_TIMEOUT_PARAMETER = Param(
    "command_timeout_s", 0.2, "commands older than this count as zero", STARTUP, ge=0.0, le=3600.0
)


def initial_positions_parameter(text: str) -> Param:
    """``initial_positions``: ``text`` says their order and the default."""
    return Param("initial_positions", [], text, STARTUP, items=float, ge=-1e3, le=1e3)


def hold_until_command_parameter(default: bool, text: str) -> Param:
    return Param("hold_until_command", default, text, STARTUP)


def lockstep_parameters(step: str, **timeout_rule) -> tuple[Param, Param]:
    """``lockstep`` (one ``step`` per effort command) and ``lockstep_timeout_s`` (its lower bound
    ``timeout_rule``: ``gt=`` or ``ge=``)."""
    return (
        Param(
            "lockstep",
            False,
            f"one {step} per effort command, simulated time on /clock (controller with use_sim_time) "
            "instead of wall time",
            STARTUP,
        ),
        Param(
            "lockstep_timeout_s",
            0.05,
            "lockstep: wall time after which a missing command steps anyway [s]",
            STARTUP,
            le=3600.0,
            **timeout_rule,
        ),
    )
