"""Sphinx configuration of the ros_lnn documentation (Markdown pages through MyST, as ROS 2's rosdoc2
builds a package's docs): ``make docs`` builds it into build/docs with warnings as errors."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

project = "ros_lnn"
author = "ros_lnn maintainers"
copyright = "ros_lnn maintainers, Apache-2.0"
release = re.search(r"<version>\s*([^<\s]+)\s*</version>", (ROOT / "package.xml").read_text()).group(1)
version = release

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 4
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
html_theme = "alabaster"
html_theme_options = {
    "description": "Physics-structured learned dynamics for ROS 2 robots",
    "fixed_sidebar": True,
}
html_title = "ros_lnn"
