# The two commands: `make test` and `make demo`. Both set everything up first and are idempotent.
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
SF      := $(VENV)/bin/slurm-fair
PYTEST_ARGS ?=

.PHONY: setup system-packages venv pyslurm pyslurm-rootfs lint test test-fast demo clean dist check-wheel test-pythons

setup: system-packages venv

system-packages:
	@scripts/system-packages.sh

venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,highs]'
	touch $@

# ruff on the whole tree, mypy on slurm_fair/ (strict on model.py and policies/; pyproject.toml)
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# pyslurm for this host's Slurm (the second backend), from ../shared/vendor when that is there: built
# once into a cache outside the checkout (scripts/build-pyslurm.sh; minutes the first time), then
# installed into the venv. Without the sources the script says so (exit 3) and the pyslurm tests skip.
pyslurm: venv
	@scripts/build-pyslurm.sh --python $(PY); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 3 ]

# The contract suite's pyslurm arm on Slurm 24.11, inside its testbed's root filesystem (the host's
# Python cannot load libslurm 24.11): pyslurm 24.11 built there, as a site would on its Slurm host,
# once per machine (cached by its sources' hash; the first build takes minutes, a rerun ~1 min),
# then the contract, comparison and chaos tests with backend=pyslurm, counted (scripts/pyslurm-rootfs.sh).
# Brings the testbed up (and down) when it is not up. Skipped, saying so, without ../shared/vendor.
PYSLURM_ROOTFS ?= 24.11
pyslurm-rootfs: venv
	scripts/pyslurm-rootfs.sh $(PYSLURM_ROOTFS)

# the whole suite, then the pyslurm arm of each Slurm the host's Python cannot load (PYSLURM_ROOTFS=
# leaves it out): in lanes side by side, the unit tests, each Slurm version's real tests (its
# pyslurm arm after them; 22.05's as two lanes on two testbeds, CI_SPLIT_VERSIONS) and the docker
# test (scripts/ci-lanes.sh; CI_LANES= picks lanes)
test: setup lint pyslurm
	VENV=$(VENV) PYSLURM_ROOTFS="$(PYSLURM_ROOTFS)" scripts/ci-lanes.sh $(PYTEST_ARGS)

test-fast: venv
	$(VENV)/bin/pytest -m "not slurm" $(PYTEST_ARGS)

demo: setup
	scripts/demo.sh

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache build dist

# A wheel and an sdist into dist/ (the version is slurm_fair.__version__). Built without build
# isolation, from the venv's own setuptools, so a host that reached PyPI once builds it again.
dist: venv
	$(PY) -m pip install -q build 'setuptools>=64' wheel
	rm -rf dist build
	$(PY) -m build --no-isolation --outdir dist .
	@ls dist

# The wheel installed into clean virtualenvs away from the checkout on each Python the project
# supports that this host has, with a smoke set run from there; then the unit tests on the oldest
# and newest (scripts/ci-pythons.sh says how it finds the interpreters).
check-wheel: dist
	scripts/ci-pythons.sh wheel 3.10 3.11 3.12 3.13

test-pythons: venv
	scripts/ci-pythons.sh unit 3.10 3.13

# Render the docker-compose cluster's configs (docker/rendered/) from templates/slurm (issue 8).
.PHONY: docker-configs
docker-configs: venv
	$(SF) render-config --target docker --config docker/slurm-fair.toml --inventory conf/testbed.toml --output-dir docker/rendered
