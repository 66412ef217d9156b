"""package.xml declares what the code imports, with real rosdep keys, and keeps workstation-only and
training-only dependencies behind REP 149 conditions, so `rosdep install` on a headless robot pulls
neither Qt nor torch."""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import HAVE_RCLPY

ROOT = Path(__file__).resolve().parents[2]
#: Where the deployment path lives: its imports must install on a robot without any condition.
DEPLOYMENT = ("nodes", "inference", "estimation", "control", "physics")
#: rosdep keys of the Python libraries the package imports (rosdistro rosdep/python.yaml); None: no key.
ROSDEP_KEYS = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "yaml": "python3-yaml",
    "onnxruntime": "python3-onnxruntime-pip",
    "torch": "python3-pytorch-pip",
    "rosbags": "python3-rosbags-pip",
    "matplotlib": "python3-matplotlib",
    "pinocchio": "pinocchio",
    "onnx": None,
    "onnxscript": None,
}
TRAINING, BRINGUP = "$ROS_LNN_TRAINING == 1", "$ROS_LNN_BRINGUP == 1"


def declared() -> dict:
    """exec_depend name -> its condition ('' for none)."""
    root = ET.parse(ROOT / "package.xml").getroot()
    return {e.text.strip(): e.get("condition", "") for e in root.findall("exec_depend")}


def imports(paths) -> dict:
    """Top-level modules imported (anywhere, lazily too) by these files -> the files importing them."""
    found: dict = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("ros_lnn", "ros_lnn_lab"):
                    found.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return found


def ros_packages() -> set:
    """Every ROS package of this environment's ament index: the sourced prefixes, or the environment's own
    prefix, where the ROS wheels register like a ROS install."""
    import os

    prefixes = os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) + [sys.prefix]
    return {
        p.name
        for prefix in prefixes
        if prefix
        for p in (Path(prefix) / "share" / "ament_index" / "resource_index" / "packages").glob("*")
    }


def package_files(*subpackages) -> list:
    return [p for sub in subpackages for p in sorted((ROOT / "ros_lnn" / sub).rglob("*.py"))]


@pytest.mark.skipif(not HAVE_RCLPY, reason="needs the ament index of a ROS environment")
def test_every_ros_package_the_code_imports_is_an_unconditional_exec_depend():
    deps, index = declared(), ros_packages()
    used = imports(
        sorted((ROOT / "ros_lnn").rglob("*.py"))
        + sorted((ROOT / "ros_lnn_lab").rglob("*.py"))
        + sorted((ROOT / "launch").glob("*.launch.py"))
    )
    ros = {m for m in used if m in index or m in ("launch", "launch_ros")}
    assert {"rclpy", "rcl_interfaces", "std_msgs", "launch_ros"} <= ros  # the scan sees what it must
    for module in sorted(ros):
        assert module in deps, (
            f"package.xml lacks <exec_depend>{module}</exec_depend> ({sorted(used[module])})"
        )
        assert deps[module] == "", f"{module} is imported by {sorted(used[module])} but conditioned"


def test_every_python_library_has_its_rosdep_key_and_deployment_ones_are_unconditional():
    deps = declared()
    deployment = imports(package_files(*DEPLOYMENT))
    everywhere = imports(
        sorted((ROOT / "ros_lnn").rglob("*.py")) + sorted((ROOT / "ros_lnn_lab").rglob("*.py"))
    )
    libraries = {m for m in everywhere if m in ROSDEP_KEYS or not _is_ros_module(m)}
    unknown = libraries - set(ROSDEP_KEYS)
    assert not unknown, f"no rosdep key known for {sorted(unknown)}: add it to package.xml and to ROSDEP_KEYS"
    for module in sorted(libraries):
        key = ROSDEP_KEYS[module]
        if key is None:  # no rosdep key: the package.xml comment tells how to install it
            assert f"pip install {module}" in (ROOT / "package.xml").read_text() or module == "onnxscript"
            continue
        assert key in deps, (
            f"package.xml lacks <exec_depend>{key}</exec_depend> for {sorted(everywhere[module])}"
        )
        if module in deployment:
            assert deps[key] == "", (
                f"{key}: the deployment path imports {module} ({sorted(deployment[module])})"
            )
        elif key != "pinocchio":
            assert deps[key] == TRAINING, f"{key} is needed by training code only: condition it on {TRAINING}"


def _is_ros_module(module: str) -> bool:
    if module in ("rclpy", "launch", "launch_ros", "ament_index_python", "tf2_ros") or module.endswith(
        ("_msgs", "_interfaces")
    ):
        return True
    return HAVE_RCLPY and module in ros_packages()


def test_visualisation_and_ros2_control_are_workstation_only():
    deps = declared()
    for name in (
        "rviz2",
        "robot_state_publisher",
        "xacro",
        "controller_manager",
        "hardware_interface",
        "joint_state_broadcaster",
        "effort_controllers",
    ):
        assert deps.get(name) == BRINGUP, f"{name} must be an exec_depend conditioned on {BRINGUP}"


def test_rosdep_sees_only_the_runtime_set_unless_asked():
    """The conditions as rosdep and colcon evaluate them (catkin_pkg, with the environment as context)."""
    catkin_pkg = pytest.importorskip(
        "catkin_pkg.package", reason="catkin_pkg comes with the ros-build extras"
    )
    package = catkin_pkg.parse_package(str(ROOT / "package.xml"))
    package.validate()

    def active(env):
        package.evaluate_conditions(env)
        return {d.name for d in package.exec_depends if d.evaluated_condition}

    robot = active({})
    assert "rclpy" in robot and "python3-onnxruntime-pip" in robot
    assert not robot & {"rviz2", "robot_state_publisher", "python3-pytorch-pip", "python3-matplotlib"}
    assert active({"ROS_LNN_TRAINING": "1"}) - robot == {
        "python3-pytorch-pip",
        "python3-rosbags-pip",
        "python3-matplotlib",
    }
    assert {"rviz2", "controller_manager", "effort_controllers"} <= active({"ROS_LNN_BRINGUP": "1"}) - robot


def test_the_ros_wheels_extras_match_the_declared_ros_packages():
    """setup.py's ros / ros-jazzy extras install, from PyPI, the ROS packages package.xml declares for the
    nodes (plus the RMW the wheels need; launch and launch_ros have no wheels)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    listed = next(
        n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "ROS_PACKAGES"
    )
    wheels = {e.value.replace("-", "_") for e in listed.elts}
    ros_runtime = {name for name, cond in declared().items() if not cond and not name.startswith("python3-")}
    # pinocchio: a ROS package on a ROS install, the `pin` wheel (setup.py's deploy list) elsewhere;
    # ros_lnn_msgs: built from interfaces/ (colcon build, or make msgs into the environment), no wheel
    # tf2_ros_py: no wheel on PyPI, dac_controller uses it only where it is installed
    assert wheels - {"rmw_fastrtps_cpp"} == ros_runtime - {
        "launch",
        "launch_ros",
        "pinocchio",
        "ros_lnn_msgs",
        "tf2_ros_py",
    }
