"""Targets given in another frame, carried into the controller's world frame (no ROS here).

A frame's pose in the world is ``(t, r)`` — origin and unit quaternion, ``(x, y, z)`` and ``(w, x, y, z)``
— so a point and an orientation given in it are, in the world, ``p_W = R(r) p_F + t`` and
``q_W = r ⊗ q_F``. :class:`FrameTable` holds fixed poses (the ``target_frames`` /
``target_frame_poses`` parameters of ``dac_controller``, as ``static_transform_publisher`` would give
them to tf2); the node asks tf2 for the others where tf2_ros is installed.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from ..physics.multibody.quaternion import quat_mul, quat_to_matrix


def to_world(translation, rotation_wxyz, position, quat_wxyz=None):
    """``(p_W, q_W or None)`` of a point and orientation given in the frame whose world pose is
    ``(translation, rotation)``."""
    r = np.asarray(rotation_wxyz, float)
    p = quat_to_matrix(r) @ np.asarray(position, float) + np.asarray(translation, float)
    if quat_wxyz is None:
        return p, None
    return p, quat_mul(r, np.asarray(quat_wxyz, float))


class FrameTable:
    """Fixed frames by name: each one's pose in the world frame, from a flat list of 7 numbers per frame,
    ``x, y, z, qx, qy, qz, qw`` (the order of ``static_transform_publisher``)."""

    def __init__(self, names=(), poses=()):
        names, flat = list(names), [float(v) for v in poses]
        if len(flat) != 7 * len(names) or len(set(names)) != len(names) or not all(map(math.isfinite, flat)):
            raise ConfigError(
                f"target_frame_poses needs 7 finite numbers (x, y, z, qx, qy, qz, qw) for each of "
                f"target_frames {names}, each frame once; got {len(flat)} numbers"
            )
        self.poses = {}
        for k, name in enumerate(names):
            x, y, z, qx, qy, qz, qw = flat[7 * k : 7 * k + 7]
            norm = math.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
            if not norm > 1e-9:
                raise ConfigError(f"target_frame_poses: frame '{name}' has a zero quaternion")
            self.poses[name] = (np.array([x, y, z]), np.array([qw, qx, qy, qz]) / norm)

    def __contains__(self, frame: str) -> bool:
        return frame in self.poses

    def to_world(self, frame: str, position, quat_wxyz=None):
        """KeyError when ``frame`` is not in the table."""
        t, r = self.poses[frame]
        return to_world(t, r, position, quat_wxyz)


__all__ = ["FrameTable", "to_world"]
