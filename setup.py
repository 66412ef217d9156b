"""ament_python package ros_lnn: builds with colcon on a ROS 2 install, installs with pip elsewhere."""

import re
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "ros_lnn"
HERE = Path(__file__).resolve().parent


def package_xml_version() -> str:
    """The version, kept in one place: package.xml (where ROS looks for it)."""
    match = re.search(r"<version>\s*([^<\s]+)\s*</version>", (HERE / "package.xml").read_text())
    if match is None:
        raise RuntimeError("package.xml has no <version>")
    return match.group(1)


# Deployment path (nodes, inference, control): no torch. `pin` is Pinocchio (rigid-body dynamics of the arms).
DEPLOY = ["numpy>=1.24", "scipy>=1.10", "onnxruntime>=1.17", "pyyaml>=6", "pin>=3.1"]
# The ROS 2 packages the nodes import (package.xml declares the same; a test checks both).
ROS_PACKAGES = [
    "rclpy", "rmw-fastrtps-cpp", "rcl-interfaces", "std-msgs", "sensor-msgs", "trajectory-msgs",
    "geometry-msgs", "visualization-msgs", "diagnostic-msgs", "lifecycle-msgs", "rosgraph-msgs",
    "builtin-interfaces", "ament-index-python",
]
# What ament_cmake + rosidl need from PyPI to build an interface package (some are missing from the
# wheels' own requirements: found by building ros_lnn_msgs in a fresh environment).
ROS_BUILD_PACKAGES = [
    "ament-cmake", "ament-package", "ament-cmake-include-directories", "rosidl-default-generators",
    "rosidl-core-generators",
]
ROS_JAZZY_BUILD_EXTRA = ["ament-cmake-ros", "ament-cmake-gmock", "ament-cmake-gtest", "ament-cmake-pytest",
                         "python-cmake-module"]
ROS_BUILD_TOOLS = ["catkin-pkg", "empy", "lark", "colcon-core", "colcon-ros"]
EXTRAS = {
    # Offline training and export. The Makefile pins torch through constraints.txt.
    # rosbags: ros_lnn/bags/storage.py reads its storage internals (3.3x faster MCAP ingest than its
    # public message iterator, 1.3x for sqlite3), so it is pinned to the versions it is tested with.
    "train": ["torch>=2.4", "onnx>=1.16", "onnxscript>=0.1", "rosbags>=0.11.9,<0.12", "matplotlib>=3.7"],
    # ROS 2 wheels from PyPI for machines without a system ROS; never install them beside a sourced ROS.
    # "ros" is Kilted, "ros-jazzy" the Jazzy LTS; one of the two per environment (they share module names).
    "ros": [f"ros-{p}" for p in ROS_PACKAGES],
    "ros-jazzy": [f"ros-jazzy-{p}" for p in ROS_PACKAGES],
    # Building interfaces/ros_lnn_msgs against those wheels (Makefile target msgs); a ROS install has these.
    "ros-build": [f"ros-{p}" for p in ROS_BUILD_PACKAGES + ["ament-cmake-ros-core"]] + ROS_BUILD_TOOLS,
    "ros-jazzy-build": [f"ros-jazzy-{p}" for p in ROS_BUILD_PACKAGES + ROS_JAZZY_BUILD_EXTRA]
    + ROS_BUILD_TOOLS,
    # ruff and mypy: `make lint`; pinned so that a new release cannot fail the check on its own
    # pytest-xdist: `make test JOBS=N` runs N test files at a time
    "test": ["pytest>=7", "pytest-xdist==3.8.0", "ruff==0.16.9", "mypy==2.4.0"],
    # `make docs`: the pages of docs/ (Sphinx + MyST, as ROS 2's rosdoc2 builds them)
    "docs": ["sphinx==9.0.4", "myst-parser==5.2.0"],
}


def data(folder, pattern="*"):
    return (f"share/{PACKAGE}/{folder}", [f for f in glob(f"{folder}/{pattern}") if "." in f.split("/")[-1]])


setup(
    name=PACKAGE,
    version=package_xml_version(),
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE: ["py.typed"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        data("launch", "*.launch.py"),
        data("config"),
        data("models"),
    ],
    install_requires=DEPLOY,
    extras_require=EXTRAS,
    python_requires=">=3.10",
    zip_safe=True,
    maintainer="ros_lnn maintainers",
    maintainer_email="maintainers@ros-lnn.invalid",
    description="Physics-structured learned dynamics (ServoLNN/DeLaN, DAC) for ROS 2",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "ros-lnn = ros_lnn.cli:main",
            "servo_lnn = ros_lnn.nodes.servo_lnn:main",
            "sim = ros_lnn.nodes.sim:main",
            "dac_controller = ros_lnn.nodes.dac_controller:main",
            "dac_chain_sim = ros_lnn.nodes.dac_chain_sim:main",
            "effort_watchdog = ros_lnn.nodes.effort_watchdog:main",
            "effort_observer = ros_lnn.nodes.effort_observer:main",
            "arm_sim = ros_lnn.nodes.arm_sim:main",
        ],
    },
)
