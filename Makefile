# The two set-up commands (README): each creates or reuses .venv/ first.
.PHONY: asan demo docs serve test wheels

demo:
	bash scripts/build/bootstrap.sh
	.venv/bin/python -m lightgbm_cegb.demo

# The service of lazy feature acquisition (lightgbm-cegb serve): the bundled HIGGS example, or
# e.g. make serve SERVE_ARGS="--model model.txt --costs costs.json --store store.sqlite"
serve:
	bash scripts/build/bootstrap.sh
	.venv/bin/lightgbm-cegb serve $(SERVE_ARGS)

# The documentation site into docs/_build/html, with warnings as errors; the examples gallery runs while it builds
# (tests/docs/test_docs.py builds it the same way in make test).
docs:
	bash scripts/build/bootstrap.sh --test
	.venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

# The distribution files into dist/ (scripts/build/wheels.py): the patched LightGBM wheel with its lightgbm program and
# the lightgbm_cegb wheel (both repaired to manylinux by auditwheel), and the sdist.
# Install both wheels with: pip install --find-links dist lightgbm-cegb
wheels:
	bash scripts/build/bootstrap.sh --test
	.venv/bin/python -m scripts.build.wheels

# The suite runs on every CPU (pytest-xdist; tests/conftest.py keeps the workers' OpenMP threads from spinning on
# each other's cores); e.g. make test PYTEST_ARGS="--durations=20" lists the slowest tests.
test:
	bash scripts/build/bootstrap.sh --test
	.venv/bin/ruff check .
	.venv/bin/python -m pytest tests -n auto --dist worksteal $(PYTEST_ARGS)

# The patch tests and the CEGB fuzz on LightGBM built with AddressSanitizer and UBSan (cached like the
# release build; slow, so not part of make test). Any invalid access or undefined behaviour aborts the run.
# libstdc++ is preloaded with the ASan runtime so that ASan can intercept C++ throws (python does not link it).
# pytest runs with -s: UBSan writes its reports to stderr (its log_path is not honoured next to ASan's runtime),
# and a test process that halts on one would lose them in pytest's capture.
asan:
	bash scripts/build/bootstrap.sh --test
	rm -rf .asan && mkdir -p .asan
	build=$$(.venv/bin/python scripts/build/lgbm_source.py build --sanitize) && \
	PYTHONPATH=$$build LIGHTGBM_CEGB_CLI=$$build/../lightgbm \
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$(CURDIR)/.asan/asan \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(CURDIR)/.asan/ubsan \
	LIGHTGBM_CEGB_FUZZ_CASES=300 .venv/bin/python -m pytest tests/patches -s -p no:cacheprovider \
	    --deselect tests/patches/test_stock.py --deselect tests/patches/test_build.py; \
	status=$$?; for report in .asan/*; do [ -f "$$report" ] && { echo "== $$report"; cat "$$report"; status=1; }; done; \
	exit $$status
