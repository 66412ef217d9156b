"""ament_python package ros_lnn: builds with colcon on a ROS 2 install, installs with pip elsewhere."""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "ros_lnn"

# Deployment path (nodes, inference, control): no torch. `pin` is Pinocchio (rigid-body dynamics of the arms).
DEPLOY = ["numpy>=1.24", "scipy>=1.10", "onnxruntime>=1.17", "pyyaml>=6", "pin>=3.1"]
EXTRAS = {
    # Offline training and export. The Makefile pins torch through constraints.txt.
    "train": ["torch>=2.4", "onnx>=1.16", "onnxscript>=0.1", "rosbags>=0.10", "matplotlib>=3.7"],
    # ROS 2 Kilted wheels for machines without a system ROS; never install them beside one.
    "ros": [
        "ros-rclpy", "ros-rmw-fastrtps-cpp", "ros-std-msgs", "ros-sensor-msgs", "ros-trajectory-msgs",
        "ros-geometry-msgs", "ros-visualization-msgs", "ros-diagnostic-msgs", "ros-lifecycle-msgs",
        "ros-rosgraph-msgs", "ros-builtin-interfaces", "ros-ament-index-python",
    ],
    "test": ["pytest>=7"],
}


def data(folder, pattern="*"):
    return (f"share/{PACKAGE}/{folder}", [f for f in glob(f"{folder}/{pattern}") if "." in f.split("/")[-1]])


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
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
