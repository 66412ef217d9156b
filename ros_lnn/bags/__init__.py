"""rosbag2 recordings (sqlite3 and mcap) without ROS and without torch: CDR codec, reading, writing,
the topic/joint mapping, the time base repairs and bags → trials."""
