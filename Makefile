# Two entry points for a fresh machine: `make demo` and `make test` (each sets up .venv/ first).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= train,ros,test

.PHONY: demo test lint venv bench clean

$(VENV)/.installed: setup.py setup.cfg pyproject.toml package.xml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[$(EXTRAS)]'
	touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/ros-lnn demo

test: $(VENV)/.installed
	$(PY) -m pytest -q -ra test

# ruff (lint + format check) and mypy, configured in pyproject.toml
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check ros_lnn test
	$(VENV)/bin/ruff format --check ros_lnn test
	$(VENV)/bin/mypy ros_lnn

bench: $(VENV)/.installed
	$(VENV)/bin/ros-lnn bench inference

clean:
	rm -rf $(VENV) build *.egg-info
