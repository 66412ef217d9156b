"""The demos of ``ros-lnn demo``: what they run, beside the command that parses and prints.

``live``: the simulator and estimator nodes in one process (ROS); ``dac``: the DAC controller's closed
loop without ROS and its plant-mismatch workflow (record, train the learned port, compare). A demo may
import what a command may (nodes included); only commands and tests import a demo."""
