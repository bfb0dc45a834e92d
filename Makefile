# The two commands of the README: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: demo test lint typecheck pytest bench messages cli-messages compiled interpreted

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

demo: $(VENV)/.runtime
	$(PY) manage.py demo --port $(PORT)

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy

pytest: $(VENV)/.dev
	$(PY) -m pytest

test: lint typecheck pytest

# Optional: the scheduler compiled by mypyc, as the production image runs it (about 1.5 x faster
# a cycle). The compiled modules shadow the source: after changing scheduler/, run it again (the
# package refuses to import an older build), or `make interpreted` to go back to the source.
compiled: $(VENV)/.dev
	$(VENV)/bin/mypyc scheduler/

interpreted:
	rm -rf scheduler/*.so ./*__mypyc.*.so build/

# For maintainers, after changing user-facing text: needs gettext's tools (xgettext, msgfmt).
# The compiled catalogs are committed, so `make test` and `make demo` need no gettext tools.
# gpuctl (cli/) keeps its own catalogue; agent and kubesim have no translated text.
MESSAGES_IGNORE := --ignore=.venv --ignore=var --ignore=tests --ignore=bench --ignore=docs \
	--ignore=deploy --ignore=cli --ignore=agent --ignore=kubesim --ignore=static/vendor
messages: $(VENV)/.runtime
	$(PY) manage.py makemessages -l zh_Hans --no-obsolete $(MESSAGES_IGNORE)
	$(PY) manage.py makemessages -d djangojs -l zh_Hans --no-obsolete $(MESSAGES_IGNORE)
	$(PY) manage.py compilemessages -l zh_Hans $(MESSAGES_IGNORE)

# gpuctl's own catalogue (cli/locale), shipped with the package.
CLI_CATALOGUE := cli/locale/zh_Hans/LC_MESSAGES/gpuctl
cli-messages:
	xgettext -L Python --keyword=_ --keyword=ngettext:1,2 --from-code=UTF-8 -o cli/locale/gpuctl.pot cli/*.py
	msgmerge -N -U $(CLI_CATALOGUE).po cli/locale/gpuctl.pot
	msgfmt -o $(CLI_CATALOGUE).mo $(CLI_CATALOGUE).po
