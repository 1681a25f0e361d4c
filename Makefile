# Two commands for a fresh machine (see README):
#   make demo   set up .venv and run the offline CPU demo workflow (config/config.yaml)
#   make test   set up .venv and run the test suite
#   make test-fast   the suite without the tests marked slow (end-to-end subprocess runs)
PYTHON ?= python3
# pytest-xdist workers of `make test` (one per core of the 2-core CI box); the tests marked
# serial (multi-process DDP under torchrun, signal timing) run after them, alone
TEST_WORKERS ?= 2
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: demo test test-fast shared-data rehearsal dag clean-results

$(BIN)/.elmoc-installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e '.[test]'
	@# compile the C++ LSTM time loop once (~15-30 s; falls back to Python without a compiler)
	$(BIN)/python -c "from elmoc.encoders.native import native_status; print('elmoc LSTM:', native_status())"
	touch $@

# A quiet console (profiles/default); `make demo VERBOSE=1`: every rule block and shell command
# (profiles/verbose).
PROFILE := $(if $(VERBOSE),--workflow-profile profiles/verbose,)

# The demo: the workflow, its self-contained HTML report, where to find things, then the
# summary measured in this run, last.
# Its run (config/config.yaml's `run: demo`) writes under results/demo/ and logs/demo/.
demo: $(BIN)/.elmoc-installed
	$(BIN)/snakemake --cores $(CORES) $(PROFILE)
	$(BIN)/snakemake --cores 1 $(PROFILE) --report results/demo/report.html
	@echo
	@echo "Report: $(CURDIR)/results/demo/report.html (open it in a browser); tables: results/demo/tables/; logs: logs/demo/"
	@echo
	@cat results/demo/summary.txt

# two passes: the suite on $(TEST_WORKERS) workers (one test file per worker at a time, so a module's
# fixtures are built once), then the serial tests alone; both always run, either failing fails
test: $(BIN)/.elmoc-installed
	status=0; \
	$(BIN)/python -m pytest -q --durations=25 -n $(TEST_WORKERS) --dist loadfile -m "not serial" || status=$$?; \
	$(BIN)/python -m pytest -q --durations=10 -m serial || status=$$?; \
	exit $$status

# while editing: everything but the end-to-end runs (snakemake, torchrun, `elmoc train` subprocesses)
test-fast: $(BIN)/.elmoc-installed
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow"

# run shared-data: results/shared-data/, beside the demo's results/demo/
shared-data: $(BIN)/.elmoc-installed
	$(BIN)/snakemake --cores $(CORES) --configfile config/shared-data.yaml

# config/paper.yaml with the sizes shrunk, end to end on 2 CPU cores (docs/full-run.md)
rehearsal: $(BIN)/.elmoc-installed
	.ci/rehearsal.sh

dag: $(BIN)/.elmoc-installed
	$(BIN)/snakemake --rulegraph mermaid-js --cores 1 --configfile config/paper.yaml | grep -v "^\s*style " > docs/rulegraph.mmd

clean-results:
	rm -rf results logs .snakemake
