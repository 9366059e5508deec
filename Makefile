# The two commands of the README: `make demo` and `make test`. Both set up what
# they need (distro packages, then a virtual environment in .venv) and can be
# run again at any time.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.iolab-installed
PYTEST_ARGS ?=

.PHONY: setup system-deps demo test clean

setup: system-deps $(STAMP)

system-deps:
	@bash tools/install-system-deps.sh

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: setup
	@bash tools/demo.sh

test: setup
	@bash tools/test.sh $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) reports scratch
