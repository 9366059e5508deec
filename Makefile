# The two commands of the README: `make demo` and `make test`. Both set up what
# they need (distro packages, then a virtual environment in .venv) and can be
# run again at any time.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.iolab-installed
PYTEST_ARGS ?=

.PHONY: setup system-deps lab-deps demo test clean

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

# the lab VM's parts (qemu, a stock kernel, virtme-ng in .venv-lab); tools/test.sh
# calls the same script and skips the lab tier, with one line, when they cannot be had
lab-deps:
	@bash tools/install-lab-deps.sh

test: setup
	@bash tools/test.sh $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .venv-lab reports scratch
	rm -rf /var/tmp/iolab-lab.pyimages   # the lab's cached python images (iolab/lab/pyimage.py)
