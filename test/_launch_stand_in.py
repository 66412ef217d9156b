"""A stand-in for the parts of launch / launch_ros the launch files use, evaluated the way launch does.

launch and launch_ros have no wheels on PyPI (the ROS wheels stop at rclpy), so the launch files cannot
run under the real LaunchService here. This module gives them the same import paths and evaluates
what a launch would start: arguments (defaults, choices, overrides), substitutions (LaunchConfiguration,
PathJoinSubstitution, FindPackageShare through the real ament index, FileContent, IfElse/Equals/Not/And,
EnvironmentVariable, Command),
conditions (IfCondition/UnlessCondition, with launch's rule that only true/false/1/0 are valid),
scoped GroupAction, IncludeLaunchDescription of another launch file, OpaqueFunction (called with the
launch configurations as its context, as launch calls it with its LaunchContext), Node and
LifecycleNode with their parameters (ParameterValue typed as launch_ros types it), remappings,
arguments, respawn (a bool or a substitution, performed as launch does) and respawn_delay (a float
only, as launch takes it). Where the real launch and launch_ros import (a ROS install),
test_launch_files.py uses them instead.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import yaml


class LaunchError(Exception):
    pass


def perform(value, context: dict) -> str:
    """A substitution, a string, or a list of them (concatenated), as launch performs them."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "".join(perform(v, context) for v in value)
    return value.perform(context)


def as_bool(text: str) -> bool:
    """launch's condition rule: 'true'/'1' and 'false'/'0' (any case); anything else is an error."""
    low = text.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise LaunchError(f"invalid condition expression {text!r}")


class Substitution:
    def perform(self, context: dict) -> str:
        raise NotImplementedError


class LaunchConfiguration(Substitution):
    def __init__(self, name, default=None):
        self.name, self.default = name, default

    def perform(self, context):
        if self.name in context:
            return context[self.name]
        if self.default is not None:
            return perform(self.default, context)
        raise LaunchError(f"launch configuration '{self.name}' does not exist")


class PathJoinSubstitution(Substitution):
    def __init__(self, parts):
        if any(not isinstance(p, (str, Substitution)) for p in parts):
            raise LaunchError(
                "PathJoinSubstitution takes strings and substitutions: launch cannot normalize "
                "a list in it (concatenate outside: [PathJoinSubstitution([...]), '.yaml'])"
            )
        self.parts = parts

    def perform(self, context):
        return os.path.join(*[perform(p, context) for p in self.parts])


class FileContent(Substitution):
    def __init__(self, path):
        self.path = path

    def perform(self, context):
        return Path(perform(self.path, context)).read_text()


class EqualsSubstitution(Substitution):
    def __init__(self, left, right):
        self.left, self.right = left, right

    def perform(self, context):
        return str(perform(self.left, context) == perform(self.right, context)).lower()


class NotEqualsSubstitution(EqualsSubstitution):
    def perform(self, context):
        return str(not as_bool(super().perform(context))).lower()


class NotSubstitution(Substitution):
    def __init__(self, value):
        self.value = value

    def perform(self, context):
        return str(not as_bool(perform(self.value, context))).lower()


class AndSubstitution(Substitution):
    def __init__(self, left, right):
        self.left, self.right = left, right

    def perform(self, context):
        return str(as_bool(perform(self.left, context)) and as_bool(perform(self.right, context))).lower()


class IfElseSubstitution(Substitution):
    def __init__(self, condition, if_value="", else_value=""):
        self.condition, self.if_value, self.else_value = condition, if_value, else_value

    def perform(self, context):
        return perform(
            self.if_value if as_bool(perform(self.condition, context)) else self.else_value, context
        )


class EnvironmentVariable(Substitution):
    """An environment variable's value, ``default_value`` where it is unset (launch raises without one)."""

    def __init__(self, name, default_value=None):
        self.name, self.default_value = name, default_value

    def perform(self, context):
        name = perform(self.name, context)
        if name in os.environ:
            return os.environ[name]
        if self.default_value is None:
            raise LaunchError(f"environment variable '{name}' does not exist")
        return perform(self.default_value, context)


class Command(Substitution):
    """A command's standard output, as launch runs it (split as a shell would; no shell)."""

    def __init__(self, command):
        self.command = command

    def perform(self, context):
        import shlex
        import shutil
        import subprocess

        argv = shlex.split(perform(self.command, context))
        if not argv or shutil.which(argv[0]) is None:
            raise LaunchError(f"Command: executable '{argv[0] if argv else ''}' not found")
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise LaunchError(f"Command {argv} failed: {done.stderr.strip()}")
        return done.stdout


class FindPackageShare(Substitution):
    def __init__(self, package):
        self.package = package

    def perform(self, context):
        from ament_index_python.packages import get_package_share_directory

        return get_package_share_directory(perform(self.package, context))


class IfCondition:
    def __init__(self, expression):
        self.expression = expression

    def evaluate(self, context) -> bool:
        return as_bool(perform(self.expression, context))


class UnlessCondition(IfCondition):
    def evaluate(self, context) -> bool:
        return not super().evaluate(context)


class LaunchDescription:
    def __init__(self, entities=()):
        self.entities = list(entities)


class DeclareLaunchArgument:
    def __init__(self, name, default_value=None, description="", choices=None):
        self.name, self.default_value, self.description, self.choices = (
            name,
            default_value,
            description,
            choices,
        )


class GroupAction:
    def __init__(self, actions, condition=None, scoped=True):
        self.actions, self.condition, self.scoped = list(actions), condition, scoped


class PythonLaunchDescriptionSource:
    def __init__(self, path):
        self.path = path


class IncludeLaunchDescription:
    def __init__(self, source, launch_arguments=(), condition=None):
        self.source, self.launch_arguments, self.condition = source, list(launch_arguments), condition


class OpaqueFunction:
    def __init__(self, function, args=(), kwargs=None):
        self.function, self.args, self.kwargs = function, list(args), dict(kwargs or {})


class Context(dict):
    """The launch configurations, as launch's LaunchContext offers them to an OpaqueFunction."""

    @property
    def launch_configurations(self) -> dict:
        return self

    def perform_substitution(self, substitution) -> str:
        return perform(substitution, self)


class ParameterValue:
    def __init__(self, value, value_type=None):
        self.value, self.value_type = value, value_type

    def evaluate(self, context):
        text = perform(self.value, context)
        if self.value_type is str:
            return text
        value = yaml.safe_load(text)
        if self.value_type is bool and not isinstance(value, bool):
            raise LaunchError(f"{text!r} is not a bool")
        if self.value_type is float:
            value = float(value)
        return value


class Node:
    lifecycle = False

    def __init__(
        self,
        *,
        package,
        executable,
        name=None,
        namespace="",
        parameters=(),
        remappings=(),
        arguments=(),
        condition=None,
        output="log",
        respawn=False,
        respawn_delay=None,
        **kwargs,
    ):
        if respawn_delay is not None and not isinstance(respawn_delay, (int, float)):
            raise LaunchError("respawn_delay is a float for launch (it performs no substitution on it)")
        self.package, self.executable, self.name, self.namespace = package, executable, name, namespace
        self.parameters, self.remappings, self.arguments = list(parameters), list(remappings), list(arguments)
        self.condition, self.autostart = condition, False
        self.respawn, self.respawn_delay = respawn, respawn_delay


class LifecycleNode(Node):
    lifecycle = True

    def __init__(self, *, name, namespace, autostart: bool = False, **kwargs):
        if not isinstance(autostart, bool):
            raise LaunchError("LifecycleNode takes autostart as a bool (launch_ros does not perform it)")
        super().__init__(name=name, namespace=namespace, **kwargs)
        self.autostart = autostart


def modules() -> dict:
    """sys.modules entries that make ``import launch`` / ``import launch_ros`` resolve to this stand-in."""
    names = {
        "launch": {"LaunchDescription": LaunchDescription},
        "launch.actions": {
            "DeclareLaunchArgument": DeclareLaunchArgument,
            "GroupAction": GroupAction,
            "IncludeLaunchDescription": IncludeLaunchDescription,
            "OpaqueFunction": OpaqueFunction,
        },
        "launch.conditions": {"IfCondition": IfCondition, "UnlessCondition": UnlessCondition},
        "launch.launch_description_sources": {"PythonLaunchDescriptionSource": PythonLaunchDescriptionSource},
        "launch.substitutions": {
            c.__name__: c
            for c in (
                LaunchConfiguration,
                PathJoinSubstitution,
                FileContent,
                EqualsSubstitution,
                NotEqualsSubstitution,
                NotSubstitution,
                AndSubstitution,
                IfElseSubstitution,
                EnvironmentVariable,
                Command,
            )
        },
        "launch_ros": {},
        "launch_ros.actions": {"Node": Node, "LifecycleNode": LifecycleNode},
        "launch_ros.parameter_descriptions": {"ParameterValue": ParameterValue},
        "launch_ros.substitutions": {"FindPackageShare": FindPackageShare},
    }
    out = {}
    for name, attrs in names.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        out[name] = module
    return out


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"launch_file_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


def _node_record(node: Node, context: dict) -> dict:
    params = []
    for entry in node.parameters:
        if isinstance(entry, dict):
            params.append(
                {
                    perform(k, context): (
                        v.evaluate(context)
                        if isinstance(v, ParameterValue)
                        else v
                        if isinstance(v, (bool, int, float, list))
                        else perform(v, context)
                    )
                    for k, v in entry.items()
                }
            )
        else:
            params.append(perform(entry, context))
    return {
        "package": node.package,
        "executable": node.executable,
        "name": perform(node.name, context) if node.name is not None else None,
        "namespace": perform(node.namespace, context),
        "lifecycle": node.lifecycle,
        "autostart": node.autostart,
        "parameters": params,
        "remappings": [(perform(a, context), perform(b, context)) for a, b in node.remappings],
        "arguments": [perform(a, context) for a in node.arguments],
        "respawn": _respawn(node.respawn, context),
        "respawn_delay": node.respawn_delay,
    }


def _respawn(value, context: dict) -> bool:
    """launch's respawn: a bool, or a substitution performed to one (true/false/1/0)."""
    return value if isinstance(value, bool) else as_bool(perform(value, context))


def evaluate(entities, context: dict, started: list) -> None:
    for entity in entities:
        condition = getattr(entity, "condition", None)
        if condition is not None and not condition.evaluate(context):
            continue
        if isinstance(entity, DeclareLaunchArgument):
            if entity.name not in context:
                if entity.default_value is None:
                    raise LaunchError(f"launch argument '{entity.name}' has no value and no default")
                context[entity.name] = perform(entity.default_value, context)
            if entity.choices is not None and context[entity.name] not in entity.choices:
                raise LaunchError(f"{entity.name}:={context[entity.name]} is not one of {entity.choices}")
        elif isinstance(entity, Node):
            started.append(_node_record(entity, context))
        elif isinstance(entity, GroupAction):
            evaluate(entity.actions, dict(context) if entity.scoped else context, started)
        elif isinstance(entity, IncludeLaunchDescription):
            child = dict(context)  # launch sets the arguments in the including scope
            for key, value in entity.launch_arguments:
                child[perform(key, context)] = perform(value, context)
            context.update(child)
            evaluate(load(Path(perform(entity.source.path, context))).entities, context, started)
        elif isinstance(entity, OpaqueFunction):
            made = entity.function(Context(context), *entity.args, **entity.kwargs)
            evaluate(made or [], context, started)
        else:
            raise LaunchError(f"the stand-in does not know {type(entity).__name__}")


def run(path: Path, arguments: dict, monkeypatch) -> list[dict]:
    """The nodes a launch of ``path`` with ``arguments`` (name:=value) starts."""
    for name, module in modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    description = load(path)
    declared = {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    unknown = set(arguments) - declared
    if unknown:
        raise LaunchError(f"{path.name} declares no launch arguments {sorted(unknown)}")
    started: list = []
    evaluate(description.entities, dict(arguments), started)
    return started
