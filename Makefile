# Two entry points: `make demo` and `make test`. Both create .venv and install what they need; `make docs` builds
# the documentation site into site/.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test docs install bench clean models models-parsers models-nmt models-reader

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)

# torch is installed first and pinned, so nothing later can resolve a newer (CUDA) build. The gpu extra (triton)
# installs on CPU machines too: the tests run the Triton kernel under its interpreter. The fused CPU kernel is
# compiled here where a compiler is (docs/robustness.md), so its first use only loads it.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	echo "torch==2.13.0" > $(VENV)/constraints.txt
	$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -e ".[models,dev,hf,gpu,docs]"
	$(BIN)/python -m structattn.attention.build_kernel || echo "structattn: continuing without the fused CPU kernel"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/structattn demo

test: $(STAMP)
	$(BIN)/python -m pytest tests

# a broken link, a missing page or an API reference that does not resolve fails the build
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The trained models that load by name (src/structattn/trained/, `structattn models`): train and ship them again
# (experiments/make_models.sh; a finished run in runs/ is only shipped again). All three are committed; `models`
# rebuilds the parsers (about half an hour each on one CPU thread), `models-nmt` the translator (about 2 hours).
models: models-parsers

models-parsers: $(STAMP)
	BIN=$(BIN) bash experiments/make_models.sh parsers

models-nmt: $(STAMP)
	BIN=$(BIN) bash experiments/make_models.sh nmt

models-reader: $(STAMP)
	BIN=$(BIN) bash experiments/make_models.sh reader

bench: $(STAMP)
	$(BIN)/python benchmarks/attention.py
	$(BIN)/python benchmarks/structure_pipeline.py
	$(BIN)/python benchmarks/cky.py
	$(BIN)/python benchmarks/nsa.py
	$(BIN)/python benchmarks/parsing.py
	$(BIN)/python benchmarks/sgnet.py
	$(BIN)/python benchmarks/nmt.py

clean:
	rm -rf $(VENV) site
