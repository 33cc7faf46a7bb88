"""The Cython extensions of lightgbm_cegb (cython_ext/*.pyx -> lightgbm_cegb/*.so); the rest of the
package's metadata is in pyproject.toml.

The patched LightGBM itself is not built here: scripts/build/lgbm_source.py builds it from the pinned sdist
and patches/, and scripts/build/bootstrap.sh installs both into .venv/.
"""

import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

openmp = [] if sys.platform == "darwin" else ["-fopenmp"]
extensions = [
    Extension(
        f"lightgbm_cegb.{name}",
        [f"cython_ext/{name}.pyx"],
        include_dirs=[np.get_include(), "cython_ext"],
        extra_compile_args=["-O3", *openmp],
        extra_link_args=openmp,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in ["_budgetrf", "_cstc", "_engine", "_lgbtext", "_prune"]
]

setup(ext_modules=cythonize(extensions, include_path=["cython_ext"], language_level=3), zip_safe=False)
