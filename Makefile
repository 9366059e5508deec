# The two commands of the README: `make demo` and `make test`. Each sets up what it
# needs (its distro packages, then a virtual environment in .venv) and can be run
# again at any time. The package lists, by purpose, are in tools/packages.txt.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.iolab-installed
PYTEST_ARGS ?=

.PHONY: setup venv demo-deps test-deps lab-deps demo test clean

# the demo's packages (fio, bubblewrap, Python's venv, a Japanese font) and the venv
setup: demo-deps venv

venv: $(STAMP)

# the demo's packages only: no database server, no sshd, nothing that runs as a service
demo-deps:
	@bash tools/install-system-deps.sh demo

# the demo's and the tests' packages; their system services are neither started nor enabled
test-deps:
	@bash tools/install-system-deps.sh test

# after the demo's packages: python3 -m venv needs python3-venv
$(STAMP): pyproject.toml | demo-deps
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# the demo's report, then JupyterLab (the lab extra) and the command that opens notebooks/explore.ipynb
demo: demo-deps venv
	@bash tools/demo.sh

# the lab VM's parts (qemu, a stock kernel, virtme-ng in .venv-lab); tools/test.sh
# calls the same script and skips the lab tier, with one line, when they cannot be had
lab-deps:
	@bash tools/install-lab-deps.sh

test: test-deps venv
	@bash tools/test.sh $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .venv-lab reports scratch
	rm -rf /var/tmp/iolab-lab.pyimages   # the lab's cached python images (iolab/lab/pyimage.py)
