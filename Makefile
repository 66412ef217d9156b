# Two entry points for a fresh machine: `make demo` and `make test` (each sets up its virtual environments first).
# `make test` runs the suite on the ROS 2 Kilted wheels (.venv/) and then on the Jazzy wheels (.venv-jazzy/).
PYTHON ?= python3
VENV ?= .venv
JAZZY_VENV ?= .venv-jazzy
PY := $(VENV)/bin/python
EXTRAS ?= train,ros,test
JAZZY_EXTRAS ?= train,ros-jazzy,test
PYTEST_ARGS ?= -q -ra -p no:cacheprovider

.PHONY: demo test test-kilted test-jazzy venv venv-jazzy bench clean

# $(1): the environment's folder, $(2): the extras installed into it.
define make_venv
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade pip
	$(1)/bin/python -m pip install -q -c constraints.txt -e '.[$(2)]'
	touch $(1)/.installed
endef

$(VENV)/.installed: setup.py setup.cfg constraints.txt
	$(call make_venv,$(VENV),$(EXTRAS))

$(JAZZY_VENV)/.installed: setup.py setup.cfg constraints.txt
	$(call make_venv,$(JAZZY_VENV),$(JAZZY_EXTRAS))

venv: $(VENV)/.installed

venv-jazzy: $(JAZZY_VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/ros-lnn demo

# Both distributions run even when the first fails; the target fails if either did.
test: $(VENV)/.installed $(JAZZY_VENV)/.installed
	@rc=0; \
	echo "== ROS 2 Kilted wheels ($(VENV))"; $(PY) -m pytest $(PYTEST_ARGS) test || rc=$$?; \
	echo "== ROS 2 Jazzy wheels ($(JAZZY_VENV))"; $(JAZZY_VENV)/bin/python -m pytest $(PYTEST_ARGS) test || rc=$$?; \
	exit $$rc

test-kilted: $(VENV)/.installed
	$(PY) -m pytest $(PYTEST_ARGS) test

test-jazzy: $(JAZZY_VENV)/.installed
	$(JAZZY_VENV)/bin/python -m pytest $(PYTEST_ARGS) test

bench: $(VENV)/.installed
	$(VENV)/bin/ros-lnn bench inference

clean:
	rm -rf $(VENV) $(JAZZY_VENV) build *.egg-info
