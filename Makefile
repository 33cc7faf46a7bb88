# The two set-up commands (README): each creates or reuses .venv/ first.
.PHONY: asan demo serve test

demo:
	bash scripts/bootstrap.sh
	.venv/bin/python -m lightgbm_cegb.demo

serve:  # the example service of lazy feature acquisition (scripts/lazy_service.py)
	bash scripts/bootstrap.sh
	.venv/bin/python scripts/lazy_service.py

test:
	bash scripts/bootstrap.sh --test
	.venv/bin/ruff check .
	.venv/bin/python -m pytest tests

# The patch tests and the CEGB fuzz on LightGBM built with AddressSanitizer and UBSan (cached like the
# release build; slow, so not part of make test). Any invalid access or undefined behaviour aborts the run.
asan:
	bash scripts/bootstrap.sh --test
	build=$$(.venv/bin/python scripts/lgbm_source.py build --sanitize) && \
	PYTHONPATH=$$build LIGHTGBM_CEGB_CLI=$$build/../lightgbm LD_PRELOAD=$$(gcc -print-file-name=libasan.so) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LIGHTGBM_CEGB_FUZZ_CASES=300 .venv/bin/python -m pytest tests/patches -p no:cacheprovider \
	    --deselect tests/patches/test_stock.py --deselect tests/patches/test_build.py
