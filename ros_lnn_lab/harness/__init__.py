"""Test harnesses that drive the nodes over ROS (not nodes themselves): the fault-injection suite
(faults, faults_safety, fault_registry) used by test/harness/test_node_faults.py and ``ros-lnn bench fault``.
Only commands and tests import it."""
