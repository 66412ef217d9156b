"""Node parameters from one declarative table per node (as ros2_controllers' generated parameters):
name, default, description, when a change applies, and the rule a value must meet.

    TABLE = ParameterTable(
        Param("marker_rate_hz", 30.0, "rate of ~/markers", ge=0.1, le=1000.0, off=0.0),
        Param("model_path", "", "ONNX model", applies=CONFIGURE),
        ...)
    values = TABLE.attach(node, configured=lambda: node.runtime is not None)   # declares, checks sets
    values["marker_rate_hz"]                                                    # current, coerced

Types come from the default (a list default names its entry type with ``items``). Numbers must be
finite; an integer is taken for a float parameter (``-p rate:=30``). Every parameter is declared with
dynamic typing, so a value of the wrong type from a YAML file or the command line never kills the
process at start-up: the table refuses it with a reason at configure (lifecycle nodes) or at
construction (plain nodes), and refuses a live ``set_parameters`` with a reason:

* ``LIVE``: may change any time; the new value is checked against its rule (and the table's
  cross-parameter rules) before it is taken;
* ``CONFIGURE``: read at configure; refused while the node is configured (clean it up first);
* ``STARTUP``: read once when the node starts; refused after that.

Every refused set is counted (``parameter_refused`` in the node's /diagnostics) and logged in one line.
A declared parameter cannot be deleted (``ros2 param delete`` arrives as a set of type NOT_SET): the
node reads every one of its parameters, so a delete is refused with the way to change the value
instead. Every string (and every string entry of a list) has a length bound, ``max_length``
(:data:`MAX_STRING` by default), and every list at most ``max_items`` entries (:data:`MAX_ITEMS`):
a 1 MiB ``frame_id`` is refused, not kept in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult

LIVE, CONFIGURE, STARTUP = "live", "configure", "startup"
#: Longest string a parameter takes unless its ``max_length`` says otherwise (frame ids, joint names).
MAX_STRING = 1024
#: Longest path a path parameter takes (Linux PATH_MAX).
MAX_PATH = 4096
#: Longest robot_description taken (a URDF with its <ros2_control> block is tens of kB).
MAX_DESCRIPTION = 4 * 1024 * 1024
#: Most entries a list parameter takes unless its ``max_items`` says otherwise.
MAX_ITEMS = 4096
APPLIES_TEXT = {LIVE: "live", CONFIGURE: "at configure", STARTUP: "at start-up"}


@dataclass(frozen=True)
class Param:
    """One parameter. Number rules (``ge``, ``gt``, ``le``) hold for a number and for each entry of a
    number list; ``off`` is a value allowed besides the range that switches the feature off;
    ``choices`` holds for a string and for each entry of a string list; ``unique``: list entries
    distinct; ``size``: allowed list lengths; ``check``: any other rule, value -> reason ('' if fine);
    ``max_length``: longest string (or string entry); ``max_items``: most list entries."""

    name: str
    default: object
    description: str
    applies: str = LIVE
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    off: float | None = None
    choices: tuple = ()
    unique: bool = False
    size: tuple = ()
    items: type | None = None
    check: Callable | None = None
    max_length: int = MAX_STRING
    max_items: int = MAX_ITEMS

    @property
    def kind(self) -> type:
        return type(self.default)

    @property
    def item_kind(self) -> type:
        if self.items is not None:
            return self.items
        default = self.default
        return type(default[0]) if isinstance(default, list) and default else float

    def constraints(self) -> str:
        """The rule in words (shown by ``ros2 param describe``)."""
        parts = []
        if self.kind in (int, float) or (self.kind is list and self.item_kind in (int, float)):
            parts.append("integer" if int in (self.kind, self.items) else "finite number")
        for word, bound in (("> ", self.gt), (">= ", self.ge), ("<= ", self.le)):
            if bound is not None:
                parts.append(f"{word}{bound:g}")
        if self.off is not None:
            parts.append(f"or {self.off:g} (off)")
        if self.choices:
            parts.append("one of " + ", ".join(self.choices))
        if self.unique:
            parts.append("no repeats")
        if self.size:
            parts.append("entries: " + " or ".join(str(s) for s in self.size))
        elif self.kind is list:
            parts.append(f"at most {self.max_items} entries")
        if self.kind is str or (self.kind is list and self.item_kind is str):
            parts.append(f"at most {self.max_length} characters")
        return ", ".join(parts)

    def coerce(self, value):
        """The value as the code uses it (float for an integer given to a float parameter, a list for
        an array) — only for values :meth:`problem` accepts."""
        if value is None and self.kind is list:
            return []
        if self.kind is float:
            return float(value)
        if self.kind is list:
            return [float(v) for v in value] if self.item_kind is float else list(value)
        return value

    def problem(self, value) -> str:
        """Why ``value`` is not allowed ('' when it is)."""
        if self.kind is list:
            if value is None:
                return ""
            if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
                return f"must be a list, got {_short(value)}"
            if len(value) > self.max_items:
                return f"has {len(value)} entries, at most {self.max_items} are taken"
            entries = list(value)
            if self.size and len(entries) not in self.size:
                return f"needs {' or '.join(str(s) for s in self.size)} entries, got {len(entries)}"
            for entry in entries:
                reason = self._scalar_problem(entry, self.item_kind)
                if reason:
                    return f"entry {_short(entry)} {reason}"
            if self.unique and len(set(entries)) != len(entries):
                repeated = sorted({e for e in entries if entries.count(e) > 1})
                return f"names {repeated} more than once"
        else:
            reason = self._scalar_problem(value, self.kind)
            if reason:
                return reason
        return self.check(value) if self.check is not None else ""

    def _scalar_problem(self, value, kind) -> str:
        if kind is bool:
            return "" if isinstance(value, bool) else f"must be true or false, got {_short(value)}"
        if kind is str:
            if not isinstance(value, str):
                return f"must be a string, got {_short(value)}"
            if len(value) > self.max_length:
                return f"is {len(value)} characters long, at most {self.max_length} are taken"
            if self.choices and value not in self.choices:
                return f"must be one of {', '.join(self.choices)}, got '{value}'"
            return ""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {_short(value)}"
        if kind is int and not isinstance(value, int):
            return f"must be an integer, got {value!r}"
        if not math.isfinite(value):
            return f"must be finite, got {value!r}"
        if self.off is not None and value == self.off:
            return ""
        for bound, ok, word in (
            (self.ge, lambda b: value >= b, ">="),
            (self.gt, lambda b: value > b, ">"),
            (self.le, lambda b: value <= b, "<="),
        ):
            if bound is not None and not ok(bound):
                off = f" (or {self.off:g} for off)" if self.off is not None else ""
                return f"must be {word} {bound:g}{off}, got {value!r}"
        return ""


def vector3(name: str, default: list, description: str, applies: str, **rules) -> Param:
    """A parameter of three numbers (a point, a direction or gravity in some frame), each within ±1e3
    unless ``rules`` say otherwise."""
    rules.setdefault("ge", -1e3)
    rules.setdefault("le", 1e3)
    return Param(name, default, description, applies, size=(3,), **rules)


class ParameterTable:
    """The parameters of one node; ``rules``: cross-parameter checks, values dict -> reason ('' if fine)."""

    def __init__(self, *params: Param, rules: tuple = ()):
        self.params = {p.name: p for p in params}
        self.rules = tuple(rules)

    def __iter__(self):
        return iter(self.params.values())

    def __contains__(self, name: str) -> bool:
        return name in self.params

    def declare(self, node) -> None:
        for p in self:
            text = p.constraints()
            desc = ParameterDescriptor(
                description=f"{p.description} [applies: {APPLIES_TEXT[p.applies]}{'; ' + text if text else ''}]",  # noqa: E501
                additional_constraints=text,
                dynamic_typing=True,
            )
            node.declare_parameter(p.name, p.default, desc)

    def read(self, node) -> dict:
        """Every parameter's current value (as set, not coerced)."""
        return {p.name: node.get_parameter(p.name).value for p in self}

    def problems(self, values: dict) -> list[str]:
        """'parameter NAME: reason' for every value (and cross rule) that does not hold; parameters not in
        ``values`` take their defaults for the cross rules."""
        found = [
            f"parameter {name}: {reason}"
            for name, value in values.items()
            if name in self.params and (reason := self.params[name].problem(value))
        ]
        if not found:
            coerced = {p.name: p.default for p in self} | self.coerce(values)
            found = [f"parameters: {reason}" for rule in self.rules if (reason := rule(coerced))]
        return found

    def check(self, node) -> None:
        """ConfigError naming the first parameter (or cross rule) of ``node`` that does not hold."""
        from ..errors import ConfigError

        problems = self.problems(self.read(node))
        if problems:
            raise ConfigError(problems[0])

    def coerce(self, values: dict) -> dict:
        """Values as the code uses them; a value that breaks its rule is left as it is (configure, or
        the node's construction, refuses it with the reason)."""
        return {
            name: self.params[name].coerce(v)
            if name in self.params and not self.params[name].problem(v)
            else v
            for name, v in values.items()
        }

    def check_set(
        self, parameters, current: dict, configured: bool, started: bool = True
    ) -> SetParametersResult:
        """Accept or refuse a ``set_parameters``: each value of the table's parameters in it against its
        rule, then the cross rules on the values the set would leave. Names outside the table (QoS
        overrides, use_sim_time) are left to rclpy."""
        proposed, mine = dict(current), []
        for parameter in parameters:
            p = self.params.get(parameter.name)
            if p is None:
                continue
            if parameter.value is None and _deleted(parameter):
                return _refuse(
                    f"{p.name} is declared by the node and cannot be deleted; set a value instead "
                    f"(ros2 param set ... {p.name} <value>)"
                )
            if p.applies == STARTUP and started:
                return _refuse(f"{p.name} is read when the node starts; restart it with -p {p.name}:=...")
            if p.applies == CONFIGURE and configured:
                return _refuse(
                    f"{p.name} is read at configure; deactivate and clean up the node, set it, "
                    "then configure again"
                )
            reason = p.problem(parameter.value)
            if reason:
                return _refuse(f"parameter {p.name}: {reason}")
            proposed[p.name] = parameter.value
            mine.append(p.name)
        if mine and not any(p.problem(proposed[p.name]) for p in self if p.name in proposed):
            coerced = self.coerce(proposed)
            broken = [reason for rule in self.rules if (reason := rule(coerced))]
            if broken:
                return _refuse("; ".join(broken))
        return SetParametersResult(successful=True)

    def attach(
        self,
        node,
        configured: Callable[[], bool] = lambda: False,
        extra_check: Callable | None = None,
        on_change: Callable | None = None,
    ) -> dict:
        """Declare the table on ``node``, refuse invalid sets, and return a dict of the coerced current
        values kept up to date after every accepted set (per-sample code reads it instead of calling
        rclpy's get_parameter, about 10 µs a call). ``extra_check(proposed coerced values)`` adds the
        node's own rules (reason or ''); ``on_change(names)`` runs after a set was taken."""
        from . import compat

        self.declare(node)
        values = self.coerce(self.read(node))
        started: list[bool] = []

        def check(parameters) -> SetParametersResult:
            result = self.check_set(parameters, self.read(node), configured(), bool(started))
            if not result.successful:
                _restore_types(node, parameters)
            if result.successful and extra_check is not None:
                proposed = self.read(node)
                proposed.update({p.name: p.value for p in parameters if p.name in self.params})
                reason = extra_check(self.coerce(proposed))
                if reason:
                    result = _refuse(reason)
            if not result.successful:
                _count_refusal(node, parameters, result.reason)
            return result

        def cache(parameters) -> None:
            names = [p.name for p in parameters if p.name in self.params]
            for parameter in parameters:
                if parameter.name in self.params:
                    values[parameter.name] = self.params[parameter.name].coerce(parameter.value)
            if names and on_change is not None:
                on_change(names)

        node.add_on_set_parameters_callback(check)
        compat.add_post_set_parameters_callback(node, cache, check)
        started.append(True)
        return values


class ParameterValues:
    """Mixin of a node whose ``values`` come from :meth:`ParameterTable.attach`: ``self.p(name)``, the
    current (coerced) value of a parameter."""

    values: dict

    def p(self, name: str):
        return self.values[name]


def _count_refusal(node, parameters, reason: str) -> None:
    """A refused set: counted in the node's ``counts`` (``parameter_refused``, in /diagnostics) and one
    warning line naming the parameter (at most one a second per parameter)."""
    from .diagnostics import warn_throttled

    counts = node.__dict__.setdefault("counts", {})
    counts["parameter_refused"] = counts.get("parameter_refused", 0) + 1
    names = ", ".join(p.name for p in parameters) or "?"
    warn_throttled(node, f"parameter_refused:{names}", f"parameter set refused ({names}): {reason}", 1.0)


def _restore_types(node, parameters) -> None:
    """rclpy writes a dynamically typed parameter's new type into its descriptor before the on-set
    callbacks run; after a refusal the descriptor gets the type of the value the node kept."""
    for parameter in parameters:
        try:
            descriptor = node.describe_parameter(parameter.name)
            descriptor.type = node.get_parameter(parameter.name).type_.value
        except Exception:  # noqa: BLE001 - an undeclared name: rclpy's own answer stands
            continue


def _deleted(parameter) -> bool:
    """A set of type NOT_SET: rclpy's way of deleting (undeclaring) a parameter."""
    kind = getattr(parameter, "type_", None)
    return kind is None or getattr(kind, "name", "") == "NOT_SET"


def _short(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: a refusal's reason never echoes a huge value."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}... ({len(text)} chars)"


def _refuse(reason: str) -> SetParametersResult:
    return SetParametersResult(successful=False, reason=reason)


def param(node, name: str):
    """A parameter's value; arrays as lists (an empty or unset array parameter reads as [])."""
    value = node.get_parameter(name).value
    if value is None:
        return []
    return (
        list(value) if isinstance(value, (list, tuple, bytes)) or type(value).__name__ == "array" else value
    )
