# The two commands: `make test` and `make demo`. Both set everything up first and are idempotent.
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
SF      := $(VENV)/bin/slurm-fair
PYTEST_ARGS ?=

.PHONY: setup system-packages venv test test-fast demo clean

setup: system-packages venv

system-packages:
	@scripts/system-packages.sh

venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,highs]'
	touch $@

test: setup
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-fast: venv
	$(VENV)/bin/pytest -m "not slurm" $(PYTEST_ARGS)

demo: setup
	scripts/demo.sh

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache

# Render the docker-compose cluster's configs (docker/rendered/) from templates/slurm (issue 8).
.PHONY: docker-configs
docker-configs: venv
	$(SF) render-config --target docker --config docker/slurm-fair.toml --inventory conf/testbed.toml --output-dir docker/rendered
