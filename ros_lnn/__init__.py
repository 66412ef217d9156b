"""ros_lnn: physics-structured learned dynamics for ROS 2.

Layers (docs/architecture.md): physics (numpy), bags (rosbag2, no torch), models (torch),
families (one description per model family), training (a typed run), inference (onnxruntime, no torch),
estimation and control (numpy), nodes (rclpy, thin), harness (the fault-injection suite), demos (what
``ros-lnn demo`` runs), commands (the ``ros-lnn`` command line); docs/architecture.md has the table.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path


def _version() -> str:
    """The installed distribution's version; in a source tree without one, package.xml's (the one
    place the version is written: setup.py reads it from there too)."""
    try:
        return metadata.version("ros_lnn")
    except metadata.PackageNotFoundError:
        package_xml = Path(__file__).resolve().parents[1] / "package.xml"
        try:
            match = re.search(r"<version>\s*([^<\s]+)\s*</version>", package_xml.read_text())
        except OSError:
            match = None
        return match.group(1) if match else "0+unknown"


__version__ = _version()
