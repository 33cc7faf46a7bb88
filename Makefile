# The two set-up commands (README): each creates or reuses .venv/ first.
.PHONY: demo test

demo:
	bash scripts/bootstrap.sh
	.venv/bin/python -m lightgbm_cegb.demo

test:
	bash scripts/bootstrap.sh --test
	.venv/bin/python -m pytest tests
