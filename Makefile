# The two set-up commands (README): each creates or reuses .venv/ first.
.PHONY: demo serve test

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
