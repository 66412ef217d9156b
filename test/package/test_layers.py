"""The package's import graph, read from the source (a static scan of every ``import`` statement):
no import cycle between modules or between packages, imports only down the layers of docs/architecture.md, the
deployment path free of torch and of the training side, the library free of ROS and of argparse.

Counting rule: every import statement counts wherever it sits: at module level, inside a function,
under ``if TYPE_CHECKING``. A function-level import defers a dependency, it does not remove it, so
a cycle through one is still a cycle (it only shows up later, at the first call). Dynamic imports
(``importlib.import_module``) are the command-line dispatch of ``cli.py`` and
``ros_lnn_lab/bench/__init__.py``, the top of the graph, and are not followed.

The lab (``ros_lnn_lab``: benchmarks, the fault/flood/soak harness, the papers' studies) is scanned with
the product: it may import the product, the product never imports it — but for ``ros-lnn bench``, the
command that hands over to the lab's benchmarks.
"""

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ros_lnn"
LAB = ROOT / "ros_lnn_lab"

#: What each part of the package may import from the others (docs/architecture.md: nodes → estimation/control/
#: inference/physics; commands → training → families → models → physics; bags need no torch).
#: "ros_lnn" is the package root (its __version__).
ALLOWED = {
    "ros_lnn": set(),
    "errors": set(),
    "files": {"errors"},
    "timing": set(),
    # finding shipped models and configs (source tree, ament index, install prefix)
    "shipped": set(),
    "physics": {"errors"},
    "bags": {"errors", "files", "physics"},
    "recordings": {"errors", "physics", "bags"},
    "estimation": {"errors", "physics"},
    "inference": {"errors", "physics", "shipped", "ros_lnn"},
    "control": {"errors", "physics", "inference", "estimation"},
    "models": {"errors", "files", "physics", "inference", "ros_lnn"},  # files: a model written atomically
    "families": {"errors", "physics", "inference", "models"},
    "training": {
        "errors",
        "files",
        "shipped",
        "physics",
        "inference",
        "models",
        "families",
        "bags",
        "ros_lnn",
    },
    # the lab: the papers' studies, the harness that drives the nodes, the benchmarks
    "lab.studies": {"errors", "physics", "models", "families", "training"},
    # arm.residual, arm.training and arm.delan are its torch side: DeLaN builds on models, both train
    # through training's loop and early stopping
    "arm": {
        "errors",
        "files",
        "shipped",
        "physics",
        "bags",
        "estimation",
        "inference",
        "models",
        "training",
        "ros_lnn",
    },
    "nodes": {
        "errors",
        "files",
        "shipped",
        "physics",
        "estimation",
        "inference",
        "control",
        "bags",
        "arm",
        "ros_lnn",
    },
    # the fault-injection harness: drives the nodes over ROS for the tests and 'ros-lnn bench fault'
    "lab.harness": {
        "errors",
        "files",
        "shipped",
        "physics",
        "estimation",
        "inference",
        "control",
        "bags",
        "arm",
        "nodes",
        "ros_lnn",
    },
    # the demos of 'ros-lnn demo' (the live one runs the nodes): what a command may import, but no command
    "demos": {
        "errors",
        "files",
        "timing",
        "shipped",
        "physics",
        "bags",
        "recordings",
        "estimation",
        "inference",
        "control",
        "models",
        "families",
        "training",
        "arm",
        "nodes",
        "ros_lnn",
    },
    "commands": {
        "errors",
        "files",
        "timing",
        "shipped",
        "physics",
        "bags",
        "recordings",
        "estimation",
        "inference",
        "control",
        "models",
        "families",
        "training",
        "arm",
        "nodes",
        "demos",
        "commands",
        "ros_lnn",
        "lab.bench",  # only ros-lnn bench, handing over (test_the_product_never_imports_the_lab)
    },
    "cli": {"errors", "files", "ros_lnn"},
    # the benchmarks: anything of the product and of the lab
    "lab.bench": {
        "errors",
        "files",
        "timing",
        "shipped",
        "physics",
        "bags",
        "recordings",
        "estimation",
        "inference",
        "control",
        "models",
        "families",
        "training",
        "arm",
        "nodes",
        "demos",
        "commands",
        "ros_lnn",
        "lab.harness",
        "lab.studies",
        "lab",
    },
    "lab": set(),
}
#: The deployment path (and what it stands on) runs without torch and without the training side; so does
#: the fault harness, which drives the nodes where they are deployed.
DEPLOYMENT = {
    "nodes",
    "lab.harness",
    "inference",
    "estimation",
    "control",
    "physics",
    "bags",
    "errors",
    "files",
    "timing",
    "shipped",
}
TRAINING_SIDE = {
    "torch",
    "onnx",
    "onnxscript",
    "ros_lnn.models",
    "ros_lnn.families",
    "ros_lnn.training",
    "ros_lnn_lab.studies",
    "ros_lnn.arm.residual",
    "ros_lnn.arm.training",
    "ros_lnn.arm.delan",
}
LIBRARY = {
    "arm",
    "physics",
    "bags",
    "recordings",
    "estimation",
    "inference",
    "control",
    "models",
    "families",
    "training",
    "errors",
    "files",
    "timing",
    "shipped",
}
#: rclpy, messages and launch; ament_index_python (an optional look-up of installed files) is allowed.
ROS = {
    "rclpy",
    "rcl_interfaces",
    "builtin_interfaces",
    "sensor_msgs",
    "std_msgs",
    "trajectory_msgs",
    "geometry_msgs",
    "visualization_msgs",
    "diagnostic_msgs",
    "lifecycle_msgs",
    "rosgraph_msgs",
    "launch",
    "launch_ros",
}


def module_files() -> dict:
    out = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *LAB.rglob("*.py")]):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = module_files()


def imported_names(module: str, path: Path) -> set:
    """Fully qualified names of everything ``module`` imports (ros_lnn modules resolved to the module)."""
    tree = ast.parse(path.read_text(), str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                names.add(sub if sub in MODULES else target)
    return names


GRAPH = {m: imported_names(m, p) for m, p in MODULES.items()}


def internal(names) -> set:
    return {n for n in names if n in MODULES}


def part(module: str) -> str:
    """The layer a module belongs to: its subpackage (``lab.<subpackage>`` in the lab), or the top-level
    module's name."""
    parts = module.split(".")
    if parts[0] == "ros_lnn_lab":
        return f"lab.{parts[1]}" if len(parts) > 1 else "lab"
    return parts[1] if len(parts) > 1 else "ros_lnn"


def strongly_connected(graph: dict) -> list:
    """Tarjan's strongly connected components with more than one member (or a self-loop)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_the_package():
    assert len(MODULES) > 80 and "ros_lnn.training.run" in MODULES
    assert "ros_lnn.families" in GRAPH["ros_lnn.training.trainer"]  # module level
    assert "ros_lnn.models.lnn" in GRAPH["ros_lnn.families.lnn"]  # inside a function
    assert "ros_lnn.bags.source" in GRAPH["ros_lnn.training.sources"]  # inside a function, from-import


def test_no_cycle_between_modules():
    graph = {m: internal(names) for m, names in GRAPH.items()}
    assert strongly_connected(graph) == []


def test_no_cycle_between_packages():
    graph = {}
    for module, names in GRAPH.items():
        graph.setdefault(part(module), set()).update(
            part(n) for n in internal(names) if part(n) != part(module)
        )
    assert strongly_connected(graph) == []


def test_a_cycle_would_be_found():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_go_down_the_layers():
    wrong = []
    for module, names in GRAPH.items():
        here = part(module)
        assert here in ALLOWED, f"{module}: add its package to ALLOWED"
        for name in internal(names):
            there = part(name)
            if there != here and there not in ALLOWED[here]:
                wrong.append(f"{module} -> {name}")
            if here == there == "commands":  # a command imports library code, not another command
                wrong.append(f"{module} -> {name} (a command importing a command)")
    assert wrong == []


#: The nodes: the executables setup.py registers (``<name> = ros_lnn.nodes.<module>:main``).
NODES = sorted(re.findall(r"=\s*ros_lnn\.nodes\.(\w+):main", (ROOT / "setup.py").read_text()))


def node_of(module: str) -> str | None:
    """The node a module of ``ros_lnn.nodes`` belongs to: the package ``ros_lnn.nodes.<node>`` and its
    modules (``node``, ``parameters``, ``build``, ``messages``, ...) are that node's; every other module of
    ``ros_lnn.nodes`` (params, lifecycle, process, diagnostics, qos, ...) is shared node code."""
    name = module.removeprefix("ros_lnn.nodes.")
    if name == module:
        return None
    head = name.split(".")[0]
    return head if head in NODES else None


def node_imports_across(graph: dict) -> list:
    """``"a -> b"`` for every import of one node's module from another node's module, or from shared node
    code into a node's module."""
    wrong = []
    for module, names in graph.items():
        if not module.startswith("ros_lnn.nodes."):
            continue
        here = node_of(module)
        for name in sorted(names):
            there = node_of(name)
            if there is not None and there != here:
                wrong.append(f"{module} -> {name}")
    return wrong


def test_the_nodes_are_the_executables():
    assert NODES == [
        "arm_sim",
        "dac_chain_sim",
        "dac_controller",
        "effort_observer",
        "effort_watchdog",
        "servo_lnn",
        "sim",
    ]
    assert node_of("ros_lnn.nodes.dac_controller.build") == "dac_controller"
    assert node_of("ros_lnn.nodes.sim.parameters") == "sim"
    assert node_of("ros_lnn.nodes.dac_chain_sim.parameters") == "dac_chain_sim"
    assert node_of("ros_lnn.nodes.params") is None  # shared node code
    assert node_of("ros_lnn.nodes.simulator_params") is None  # shared by the two arm simulators
    assert node_of("ros_lnn.shipped") is None


def test_no_node_imports_another():
    """A node's modules import the library and the shared node code, never another node's modules; the
    shared node code imports no node's module."""
    assert node_imports_across({m: internal(names) for m, names in GRAPH.items()}) == []


def test_a_node_importing_another_would_be_found():
    graph = {
        "ros_lnn.nodes.dac_chain_sim": {"ros_lnn.nodes.dac_controller", "ros_lnn.nodes.params"},
        "ros_lnn.nodes.arm_sim.node": {"ros_lnn.nodes.dac_chain_sim.parameters", "ros_lnn.nodes.clocks"},
        "ros_lnn.nodes.qos": {"ros_lnn.nodes.sim"},
        "ros_lnn.nodes.sim.node": {"ros_lnn.nodes.sim.parameters"},
    }
    assert node_imports_across(graph) == [
        "ros_lnn.nodes.dac_chain_sim -> ros_lnn.nodes.dac_controller",
        "ros_lnn.nodes.arm_sim.node -> ros_lnn.nodes.dac_chain_sim.parameters",
        "ros_lnn.nodes.qos -> ros_lnn.nodes.sim",
    ]


def test_nothing_in_the_library_imports_nodes_the_harness_demos_commands_or_the_cli():
    wrong = [
        f"{m} -> {n}"
        for m, names in GRAPH.items()
        if part(m) in LIBRARY
        for n in internal(names)
        if part(n) in ("nodes", "lab.harness", "demos", "commands", "cli")
    ]
    assert wrong == []


def test_the_deployment_path_never_imports_torch_or_the_training_side():
    wrong = [
        f"{m} -> {n}"
        for m, names in GRAPH.items()
        if part(m) in DEPLOYMENT
        for n in names
        if any(n == t or n.startswith(t + ".") for t in TRAINING_SIDE)
    ]
    assert wrong == []


def test_the_library_is_free_of_ros_and_argparse():
    wrong = [
        f"{m} -> {n}"
        for m, names in GRAPH.items()
        if part(m) in LIBRARY
        for n in names
        if n.split(".")[0] in ROS | {"argparse"}
    ]
    assert wrong == []


#: Any ``import torch`` raises ModuleNotFoundError, as on a machine without torch (sys.modules["torch"] =
#: None would also do, but scipy then finds a "torch" entry and probes it).
BLOCK_TORCH = textwrap.dedent("""
    import sys

    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "torch":
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)")

    sys.meta_path.insert(0, NoTorch())
""")


@pytest.mark.parametrize("package", ["bags", "physics", "estimation", "inference", "control", "shipped"])
def test_torch_free_packages_import_without_torch(package):
    """Importing every module of the package with torch made unimportable."""
    modules = [m for m in MODULES if part(m) == package]
    code = BLOCK_TORCH + textwrap.dedent(f"""
        import importlib
        for name in {modules!r}:
            importlib.import_module(name)
        assert 'torch' not in sys.modules
        print('ok')
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


def test_family_registry_and_option_rules_need_no_torch():
    """``ros-lnn train`` lists the families and refuses bad options before torch is imported."""
    code = BLOCK_TORCH + textwrap.dedent("""
        from ros_lnn.cli import build_parser
        from ros_lnn.commands.train import run_spec
        from ros_lnn.errors import ConfigError
        from ros_lnn.training.spec import check
        args = build_parser(only='train').parse_args(['train', '--model', 'node', '--epsilon', '0.1'])
        spec = run_spec(args)
        try:
            check(spec, spec.resolved())
        except ConfigError as exc:
            print('refused', exc)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.startswith("refused") and "--epsilon" in res.stdout, res.stderr[
        -2000:
    ]


def test_the_product_never_imports_the_lab():
    """What a robot installs (nodes, library, the user's commands) never imports the lab, but for
    ``ros-lnn bench`` handing over to it."""
    wrong = [
        f"{m} -> {n}"
        for m, names in GRAPH.items()
        if not m.startswith("ros_lnn_lab") and m != "ros_lnn.commands.bench"
        for n in names
        if n == "ros_lnn_lab" or n.startswith("ros_lnn_lab.")
    ]
    assert wrong == []
    assert any(n.startswith("ros_lnn_lab") for n in GRAPH["ros_lnn.commands.bench"])


def test_one_folder_per_node():
    """Every node is a package ``ros_lnn/nodes/<node>/``: its rclpy node (``node.py``, with ``main``), its
    parameter table (``parameters.py``), ``python -m`` (``__main__.py``); no node module lies loose."""
    nodes_dir = PACKAGE / "nodes"
    for node in NODES:
        folder = nodes_dir / node
        for name in ("__init__.py", "__main__.py", "node.py", "parameters.py"):
            assert (folder / name).is_file(), f"{node}: {name} missing"
    loose = [
        p.stem
        for p in nodes_dir.glob("*.py")
        if any(p.stem == n or p.stem.startswith(n + "_") for n in NODES)
    ]
    assert loose == [], f"node modules outside their folder: {loose}"
