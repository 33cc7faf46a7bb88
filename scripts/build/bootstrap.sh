#!/usr/bin/env bash
# Create or reuse .venv/ and install everything into it: the dependencies, the patched LightGBM (built
# from the pinned sdist + patches/, cached outside the clone) and lightgbm_cegb with its Cython
# extensions. Idempotent: each step is skipped while the stamp of what went into it is unchanged.
#   scripts/build/bootstrap.sh          what the demo needs
#   scripts/build/bootstrap.sh --test   plus the test dependencies and the stock LightGBM wheel the tests compare to
set -euo pipefail
cd "$(dirname "$0")/../.."
with_tests=0
[ "${1:-}" = "--test" ] && with_tests=1

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "[bootstrap] creating .venv with $($python --version)"
    "$python" -m venv .venv
fi
venv_python=.venv/bin/python
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)

stamp_ok() { [ -f ".venv/.stamp-$1" ] && [ "$(cat ".venv/.stamp-$1")" = "$2" ]; }
stamp_set() { echo "$2" > ".venv/.stamp-$1"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

reqs=requirements.txt
[ $with_tests = 1 ] && reqs=requirements-test.txt
key=$(hash_of requirements.txt requirements-test.txt requirements-docs.txt)-$with_tests
if ! stamp_ok "deps-$with_tests" "$key"; then
    echo "[bootstrap] installing $reqs"
    "${pip[@]}" install -r "$reqs"
    stamp_set "deps-$with_tests" "$key"
fi

# the patched LightGBM: wheel + CLI, built once per (sdist, patches, recipe) and cached
build_dir=$("$venv_python" scripts/build/lgbm_source.py build)
key=$(cat "$build_dir/DONE")
if ! stamp_ok lightgbm "$key"; then
    echo "[bootstrap] installing $(cat "$build_dir/VERSION") from $build_dir"
    "${pip[@]}" install --force-reinstall --no-deps "$build_dir"/lightgbm-*.whl
    install -m 755 "$build_dir/lightgbm" .venv/bin/lightgbm
    stamp_set lightgbm "$key"
fi

key=$(hash_of setup.py pyproject.toml cython_ext/*.pyx cython_ext/*.pxd)
if ! stamp_ok package "$key"; then
    echo "[bootstrap] building lightgbm_cegb (Cython extensions)"
    "${pip[@]}" install --no-build-isolation --no-deps -e .
    stamp_set package "$key"
fi

if [ $with_tests = 1 ]; then
    "$venv_python" scripts/build/lgbm_source.py stock > /dev/null
fi
