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


# Deployment path (nodes, inference, control): no torch.
DEPLOY = ["numpy>=1.24", "scipy>=1.10", "onnxruntime>=1.17", "pyyaml>=6", "pin>=3"]
EXTRAS = {
    # Offline training and export. The Makefile pins torch through constraints.txt.
    # rosbags: ros_lnn/bags/storage.py reads its storage internals (3.3x faster MCAP ingest than its
    # public message iterator, 1.3x for sqlite3), so it is pinned to the versions it is tested with.
    "train": ["torch>=2.4", "onnx>=1.16", "onnxscript>=0.1", "rosbags>=0.11.9,<0.12", "matplotlib>=3.7"],
    # ROS 2 Kilted wheels for machines without a system ROS; never install them beside one.
    "ros": [
        "ros-rclpy", "ros-rmw-fastrtps-cpp", "ros-std-msgs", "ros-sensor-msgs", "ros-trajectory-msgs",
        "ros-geometry-msgs", "ros-visualization-msgs", "ros-diagnostic-msgs", "ros-lifecycle-msgs",
        "ros-rosgraph-msgs", "ros-builtin-interfaces", "ros-ament-index-python",
    ],
    # ruff and mypy: `make lint`; pinned so that a new release cannot fail the check on its own
    "test": ["pytest>=7", "ruff==0.16.9", "mypy==2.4.0"],
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
        ],
    },
)
