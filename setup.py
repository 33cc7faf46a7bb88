"""Build of the lightgbm_cegb package and its Cython extensions (cython_ext/*.pyx -> lightgbm_cegb/*.so).

The patched LightGBM itself is not built here: scripts/lgbm_source.py builds it from the pinned sdist
and patches/, and scripts/bootstrap.sh installs both into .venv/.
"""

import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

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
    for name in ["_budgetrf", "_engine", "_prune"]
]

setup(
    name="lightgbm-cegb",
    version="0.1.0",
    description="Cost-efficient gradient boosting on a patched LightGBM: prediction-cost accounting and budgeted learning",
    packages=find_packages(include=["lightgbm_cegb", "lightgbm_cegb.*"]),
    package_data={"lightgbm_cegb.datasets": ["data/*/*"]},
    python_requires=">=3.10",
    install_requires=["numpy>=1.26", "scipy>=1.11", "scikit-learn>=1.5", "pandas>=2.1",
                      "joblib>=1.3", "tqdm>=4.66", "lightgbm==4.7.0"],
    extras_require={"plot": ["matplotlib>=3.8"], "dask": ["distributed>=2024.1"]},
    ext_modules=cythonize(extensions, include_path=["cython_ext"], language_level=3),
    entry_points={"console_scripts": ["lightgbm-cegb=lightgbm_cegb.cli:main"]},
    zip_safe=False,
)
