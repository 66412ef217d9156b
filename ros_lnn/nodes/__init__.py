"""rclpy nodes: thin adapters from messages to the library."""
