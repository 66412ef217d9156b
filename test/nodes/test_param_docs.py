"""docs/parameters.md's parameter tables hold every parameter of every node's table, with its default, and
are exactly the rendering of the code (ros_lnn/nodes/param_docs.py); no DDS."""

import re
from pathlib import Path

import pytest

from conftest import requires_rclpy

pytestmark = requires_rclpy

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "docs" / "parameters.md").read_text()


NODES = [
    "servo_lnn",
    "sim",
    "dac_controller",
    "dac_chain_sim",
    "effort_watchdog",
    "effort_observer",
    "arm_sim",
]


def test_every_node_executable_has_a_table():
    """Every node of setup.py's console scripts has a table, in the README's order."""
    from ros_lnn.nodes.param_docs import NODES as RENDERED

    scripts = set(re.findall(r'"(\w+) = ros_lnn\.nodes\.(\w+):main"', (ROOT / "setup.py").read_text()))
    assert {module for name, module in scripts if name == module} == set(NODES)
    assert list(RENDERED) == NODES


@pytest.mark.parametrize("node", NODES)
def test_every_parameter_is_in_the_readme_with_its_default(node):
    from ros_lnn.nodes.param_docs import default_text, readme_block, table_of

    block = readme_block(README, node)
    assert block is not None, f"docs/parameters.md has no parameter table for {node}"
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| `(.*?)` \|", block, re.M)}
    table = table_of(node)
    missing = [p.name for p in table if p.name not in rows]
    assert not missing, f"{node}: parameters missing from the README: {missing}"
    wrong = {
        p.name: (rows[p.name], default_text(p.default))
        for p in table
        if rows[p.name] != default_text(p.default)
    }
    assert not wrong, f"{node}: README default differs (README, code): {wrong}"
    extra = sorted(set(rows) - {p.name for p in table})
    assert not extra, f"{node}: README lists parameters the node does not declare: {extra}"


def test_the_readme_tables_are_the_rendering():
    from ros_lnn.nodes.param_docs import update

    assert update(README) == README, "run: python -m ros_lnn.nodes.param_docs"


def test_defaults_are_written_as_in_a_parameter_file():
    from ros_lnn.nodes.param_docs import default_text

    assert [default_text(v) for v in ("", "x", True, 0.5, 3, [0.0, -9.81], [], ["a"])] == [
        '""',
        '"x"',
        "true",
        "0.5",
        "3",
        "[0.0, -9.81]",
        "[]",
        '["a"]',
    ]
