"""Fully actuated arms with measured joint efforts: the robot's rigid body from its URDF, friction,
identification by least squares on the base parameters, the learned residual, torque evaluation.

Library code: numpy, scipy and Pinocchio; torch only in :mod:`ros_lnn.arm.residual` (training).
The deployment side (:class:`ros_lnn.arm.model.ArmModel`) needs Pinocchio and ONNX Runtime only.
"""
