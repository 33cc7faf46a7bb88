"""Build tooling: the patched LightGBM from the pinned sdist and patches/ (``lgbm_source``), the distribution files
(``wheels``) and the virtual environment of the two set-up commands (``bootstrap.sh``)."""
