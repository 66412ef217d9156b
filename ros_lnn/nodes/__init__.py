"""rclpy nodes: thin adapters from messages to the library (one node per module), and their shared
pieces by job: qos, params, stamps, messages, serialized, diagnostics, process, lifecycle."""
