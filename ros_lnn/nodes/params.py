"""Declaring and reading node parameters (with descriptions; arrays with dynamic typing)."""
from __future__ import annotations

from rcl_interfaces.msg import ParameterDescriptor


def declare(node, name: str, default, description: str, *, dynamic: bool = False, read_only: bool = False):
    """Declare one parameter with a description; returns its value. Array parameters are declared
    with dynamic typing: rclpy and the YAML parser cannot type an empty list ([] would be rejected
    or left unset), and an empty list is a meaningful value for several of them."""
    desc = ParameterDescriptor(description=description, read_only=read_only,
                               dynamic_typing=dynamic or isinstance(default, list))
    return node.declare_parameter(name, default, desc).value


def param(node, name: str):
    """A parameter's value; arrays as lists (an empty or unset array parameter reads as [])."""
    value = node.get_parameter(name).value
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple, bytes)) or type(value).__name__ == "array" else value
