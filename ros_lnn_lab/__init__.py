"""The lab: what develops and measures ros_lnn rather than what a robot runs — the benchmarks behind
``ros-lnn bench`` (:mod:`ros_lnn_lab.bench`), the fault, flood and soak harness that drives the nodes
(:mod:`ros_lnn_lab.harness`) and the papers' studies (:mod:`ros_lnn_lab.studies`). It imports the
product; the product never imports it (``test/package/test_layers.py``), except ``ros-lnn bench``
handing over to it."""
