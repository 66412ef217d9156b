"""The messages ``dac_controller`` publishes, built from the law's output: the labelled port and effort
arrays and the markers of one sample (body forces as arrows, end effector, target, obstacles)."""

from __future__ import annotations

import array

import numpy as np
from geometry_msgs.msg import Point
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from visualization_msgs.msg import Marker, MarkerArray

from ..serialized import SerializedTemplate


def port_layout(body_names) -> list:
    n = len(body_names)
    return [
        MultiArrayDimension(label="f,m", size=2, stride=6 * n),
        MultiArrayDimension(label=",".join(body_names), size=n, stride=3 * n),
        MultiArrayDimension(label="x,y,z", size=3, stride=3),
    ]


def effort_layout(joint_names) -> list:
    return [MultiArrayDimension(label=",".join(joint_names), size=len(joint_names), stride=len(joint_names))]


def array_msg(values, layout) -> Float64MultiArray:
    msg = Float64MultiArray()
    msg.layout.dim = layout
    msg.data = float_array(values)
    return msg


def float_array(values) -> array.array:
    """``array('d')``: the message field takes it as is (a list is checked element by element)."""
    return array.array("d", np.ascontiguousarray(values, dtype=float).tobytes())


def command_templates(port_layout, effort_layout):
    """Serialized copies of the port and effort commands (per sample only the numbers change), or None
    where the serialization does not allow it."""
    n_port, n_eff = port_layout[1].size * 6, effort_layout[0].size
    port_t = SerializedTemplate(lambda _, v: array_msg(v, port_layout), (n_port,), stamp_format=None)
    effort_t = SerializedTemplate(lambda _, v: array_msg(v, effort_layout), (n_eff,), stamp_format=None)
    return (port_t, effort_t) if port_t.ok and effort_t.ok else None


def marker_array(out, port, n_bodies: int, obstacles, frame: str, stamp, scale: float) -> MarkerArray:
    """The markers of one sample: the law's output ``out``, the published ``port`` of ``n_bodies``
    bodies, the obstacle field (or None), ``scale`` metres of arrow per newton."""
    markers = []

    def marker(mid, ns, kind, rgba):
        m = Marker()
        m.header.frame_id, m.header.stamp = frame, stamp
        m.ns, m.id, m.type, m.action = ns, mid, kind, Marker.ADD
        m.color.r, m.color.g, m.color.b, m.color.a = rgba
        m.pose.orientation.w = 1.0
        return m

    for i in range(n_bodies):
        m = marker(i, "body_force", Marker.ARROW, (0.9, 0.3, 0.1, 1.0))
        a, f = out.data.r[i], port[3 * i : 3 * i + 3]
        m.points = [
            Point(x=float(a[0]), y=float(a[1]), z=float(a[2])),
            Point(x=float(a[0] + scale * f[0]), y=float(a[1] + scale * f[1]), z=float(a[2] + scale * f[2])),
        ]
        m.scale.x, m.scale.y, m.scale.z = 0.01, 0.02, 0.03
        markers.append(m)
    for k, (pos, rgba, ns) in enumerate(
        [
            (out.ee_position, (0.1, 0.8, 0.1, 1.0), "end_effector"),
            (out.target_position, (0.1, 0.3, 0.9, 0.8), "target"),
        ]
    ):
        if pos is None:
            continue
        m = marker(k, ns, Marker.SPHERE, rgba)
        m.pose.position = Point(x=float(pos[0]), y=float(pos[1]), z=float(pos[2]))
        m.scale.x = m.scale.y = m.scale.z = 0.03
        markers.append(m)
    for k, obs in enumerate(obstacles.obstacles if obstacles is not None else ()):
        m = marker(k, "obstacle", Marker.SPHERE, (0.8, 0.1, 0.1, 0.6))
        m.pose.position = Point(x=float(obs.center[0]), y=float(obs.center[1]), z=float(obs.center[2]))
        m.scale.x = m.scale.y = m.scale.z = 2 * float(obs.radius)
        markers.append(m)
    return MarkerArray(markers=markers)
