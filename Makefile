# Two entry points for a fresh machine: `make demo` and `make test` (each sets up its virtual environments first).
# `make test` runs the suite on the ROS 2 Kilted wheels (.venv/) and then on the Jazzy wheels (.venv-jazzy/).
PYTHON ?= python3
VENV ?= .venv
JAZZY_VENV ?= .venv-jazzy
PY := $(VENV)/bin/python
EXTRAS ?= train,ros,ros-build,test,docs
JAZZY_EXTRAS ?= train,ros-jazzy,ros-jazzy-build,test
PYTEST_ARGS ?= -q -ra -p no:cacheprovider
# JOBS=N: N test files at a time (pytest-xdist; each worker on its own ROS domain); 1: one at a time.
# Default: 2 where the machine has two cores or more (the suite's tests are single-threaded).
JOBS ?= $(shell [ "$$(nproc 2>/dev/null || echo 1)" -ge 2 ] && echo 2 || echo 1)
XDIST := $(if $(filter-out 1,$(JOBS)),-n $(JOBS) --dist loadfile)

.PHONY: demo test test-kilted test-jazzy test-jazzy-all lint docs check venv venv-jazzy msgs bench clean

# $(1): the environment's folder, $(2): the extras installed into it.
define make_venv
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade pip
	$(1)/bin/python -m pip install -q -c constraints.txt -e '.[$(2)]'
	touch $(1)/.installed
endef

$(VENV)/.installed: setup.py setup.cfg pyproject.toml package.xml constraints.txt
	$(call make_venv,$(VENV),$(EXTRAS))

$(JAZZY_VENV)/.installed: setup.py setup.cfg pyproject.toml package.xml constraints.txt
	$(call make_venv,$(JAZZY_VENV),$(JAZZY_EXTRAS))

# interfaces/ros_lnn_msgs built with the environment's ROS wheels (ament_cmake + rosidl from PyPI) and
# installed into the environment itself: its prefix is where the wheels put their share/, lib/ and
# site-packages, so the messages import like any other. $(1): the environment's folder.
MSGS := interfaces/ros_lnn_msgs
MSGS_SOURCES := $(MSGS)/package.xml $(MSGS)/CMakeLists.txt $(wildcard $(MSGS)/msg/*.msg) interfaces/pypi_wheels.cmake
define build_msgs
	rm -rf build/$(MSGS)-$(1)
	AMENT_PREFIX_PATH=$(abspath $(1)) cmake -S $(MSGS) -B build/$(MSGS)-$(1) -DBUILD_TESTING=OFF \
	  -DCMAKE_PREFIX_PATH=$(abspath $(1)) -DCMAKE_INSTALL_PREFIX=$(abspath $(1)) \
	  -DPython3_EXECUTABLE=$(abspath $(1))/bin/python \
	  -DCMAKE_PROJECT_INCLUDE=$(abspath interfaces/pypi_wheels.cmake) > build/$(MSGS)-$(1).log 2>&1 \
	  && AMENT_PREFIX_PATH=$(abspath $(1)) cmake --build build/$(MSGS)-$(1) -j2 >> build/$(MSGS)-$(1).log 2>&1 \
	  && cmake --install build/$(MSGS)-$(1) >> build/$(MSGS)-$(1).log 2>&1 \
	  || { tail -40 build/$(MSGS)-$(1).log; exit 1; }
	touch $(1)/.msgs-installed
endef

$(VENV)/.msgs-installed: $(VENV)/.installed $(MSGS_SOURCES)
	@mkdir -p build/interfaces
	$(call build_msgs,$(VENV))

$(JAZZY_VENV)/.msgs-installed: $(JAZZY_VENV)/.installed $(MSGS_SOURCES)
	@mkdir -p build/interfaces
	$(call build_msgs,$(JAZZY_VENV))

venv: $(VENV)/.msgs-installed

venv-jazzy: $(JAZZY_VENV)/.msgs-installed

msgs: $(VENV)/.msgs-installed $(JAZZY_VENV)/.msgs-installed

demo: $(VENV)/.msgs-installed
	$(VENV)/bin/ros-lnn demo

# The whole suite on Kilted, the ROS tests (marker ros, test/conftest.py) again on Jazzy: the two
# environments differ only in ROS. Both run even when the first fails; the target fails if either did.
test: $(VENV)/.msgs-installed $(JAZZY_VENV)/.msgs-installed
	@rc=0; \
	echo "== ROS 2 Kilted wheels ($(VENV)): every test"; $(PY) -m pytest $(PYTEST_ARGS) $(XDIST) test || rc=$$?; \
	echo "== ROS 2 Jazzy wheels ($(JAZZY_VENV)): the ROS tests"; $(JAZZY_VENV)/bin/python -m pytest $(PYTEST_ARGS) $(XDIST) -m ros test || rc=$$?; \
	exit $$rc

test-kilted: $(VENV)/.msgs-installed
	$(PY) -m pytest $(PYTEST_ARGS) $(XDIST) test

# the ROS tests on Jazzy (test-jazzy-all: every test)
test-jazzy: $(JAZZY_VENV)/.msgs-installed
	$(JAZZY_VENV)/bin/python -m pytest $(PYTEST_ARGS) $(XDIST) -m ros test

test-jazzy-all: $(JAZZY_VENV)/.msgs-installed
	$(JAZZY_VENV)/bin/python -m pytest $(PYTEST_ARGS) $(XDIST) test

# ruff (lint + format check) and mypy, configured in pyproject.toml
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check ros_lnn ros_lnn_lab test launch docs/conf.py
	$(VENV)/bin/ruff format --check ros_lnn ros_lnn_lab test launch docs/conf.py
	$(VENV)/bin/mypy ros_lnn ros_lnn_lab

# the documentation (docs/: Sphinx + MyST, as rosdoc2 builds a package's docs), warnings as errors
docs: $(VENV)/.installed
	$(VENV)/bin/python -m sphinx -W --keep-going -q -b html docs build/docs/html

# lint + the fast unit tests (no DDS, no training runs): the check to run before every commit
FAST_TESTS ?= test/package/test_layers.py test/package/test_docs.py test/package/test_version.py \
  test/package/test_package_xml.py test/physics/test_physics_chain.py test/physics/test_physics_crane.py \
  test/physics/test_sim_stepper.py test/physics/test_multibody_pin.py \
  test/estimation/test_servo_estimator.py test/estimation/test_node_filters.py \
  test/control/test_control_dac.py test/control/test_control_joint_space.py test/models/test_models_losses.py \
  test/arm/test_generator.py test/arm/test_convert.py test/arm/test_arm_observer.py
check: lint
	$(PY) -m pytest $(PYTEST_ARGS) $(FAST_TESTS)

bench: $(VENV)/.installed
	$(VENV)/bin/ros-lnn bench inference

clean:
	rm -rf $(VENV) $(JAZZY_VENV) build *.egg-info
