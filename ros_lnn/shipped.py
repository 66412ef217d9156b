"""Finding the files the package ships (``models/``, ``config/``): one search order for every one of them.

A shipped file is named by its place in the package's share folder, e.g. ``("models",
"crane_servo_lnn.onnx")`` or ``("config", "robots", "panda", "panda.urdf")``, and looked for, first
existing file wins, in:

1. the source tree: the checkout this code runs from (``<repository>/models``, ``<repository>/config``),
   so that code run from a checkout (``PYTHONPATH``, ``pip install -e``, a colcon symlink install) uses
   the files beside it, not an older installed copy;
2. the ament index: ``share/ros_lnn/`` of the installed ROS package (``colcon build``; found through
   ``AMENT_PREFIX_PATH``);
3. the install prefix: ``<sys.prefix>/share/ros_lnn/`` (``pip install`` into an environment, whose
   ``data_files`` land there).

An installed package (not a checkout) has no source tree beside it, so 2 and 3 are what it finds. No
ROS and no torch here: the ament index is an optional look-up (no ``ament_index_python``, or the package
not in the index: skipped). Callers decide what a missing file is (an error naming :func:`search_paths`,
or the source-tree path that says it is missing when opened).
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = "ros_lnn"
#: The checkout holding this package (where ``models/`` and ``config/`` are when run from source).
SOURCE_TREE = Path(__file__).resolve().parents[1]


def _ament_share() -> Path | None:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE))
    except Exception:  # noqa: BLE001 - no ament index, or the package is not in it
        return None


def search_paths(*parts: str) -> list[Path]:
    """Every place the shipped file ``parts`` (``"models", name``) is looked for, in the order above."""
    places = [SOURCE_TREE]
    share = _ament_share()
    if share is not None:
        places.append(share)
    places.append(Path(sys.prefix) / "share" / PACKAGE)
    paths: list[Path] = []
    for place in places:
        path = place.joinpath(*parts)
        if path not in paths:
            paths.append(path)
    return paths


def find(*parts: str) -> Path | None:
    """The shipped file ``parts``: the first of :func:`search_paths` that is a file, else None."""
    return next((path for path in search_paths(*parts) if path.is_file()), None)


def shipped_path(*parts: str) -> Path:
    """The shipped file ``parts``, else its source-tree path (which says it is missing when opened)."""
    return find(*parts) or SOURCE_TREE.joinpath(*parts)


def demo_arm_path() -> Path:
    """The demo arm's URDF, ``config/dac_chain.urdf``: the default model of ``dac_controller`` and
    ``dac_chain_sim`` and the arm of ``ros-lnn demo dac``."""
    return shipped_path("config", "dac_chain.urdf")
