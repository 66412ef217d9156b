"""ros_lnn: physics-structured learned dynamics for ROS 2.

Layers (see README): physics (numpy), models (torch), inference (onnxruntime, no torch),
control (numpy), training (torch + rosbags), nodes (rclpy, thin).
"""
__version__ = "0.1.0"
