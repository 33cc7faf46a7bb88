"""Fuzzing the CEGB parameters, reset_parameter sequences and init models of the patched LightGBM.

A child process runs seeded random cases: CEGB parameters of random lengths and values (negative, NaN,
inf, 1e308, ids beyond the features), boosters reset to random parameters between updates, and init
models whose trees split on features outside the data. Every case must train or be refused with a
LightGBMError; a crash or a hang fails the test. ``make asan`` runs it on the build with AddressSanitizer and
UBSan, where any invalid memory access or undefined behaviour aborts the child.
"""

from __future__ import annotations

import os
import textwrap

import pytest
from conftest import ON_STOCK, run_python

CASES = int(os.environ.get("LIGHTGBM_CEGB_FUZZ_CASES", "120"))

FUZZ = textwrap.dedent("""
    import sys
    import lightgbm as lgb, numpy as np
    rng = np.random.default_rng(int(sys.argv[1]))
    F, N = 5, 200
    X = rng.normal(size=(N, F)); y = X[:, 0] + (X[:, 1] > 0)
    VALUES = [0.0, 1.0, 0.5, 1e-300, 1e300, 1e308, float("inf"), float("nan"), -1.0, 3e5]
    IDS = [-2, -1, 0, 1, 2, F - 1, F, 2 ** 31 - 1]
    BASE = {"objective": "regression", "verbose": -1, "num_leaves": 4, "min_data_in_leaf": 5, "num_threads": 1}

    def vector(values):
        return [values[i] for i in rng.integers(len(values), size=int(rng.choice([F - 1, F, F, F + 1])))]

    def cegb_params():
        params = {}
        if rng.random() < 0.5:
            params["cegb_tradeoff"] = float(rng.choice([0.0, 0.01, 1.0, 1e300]))
        if rng.random() < 0.3:
            params["cegb_penalty_split"] = float(rng.choice(VALUES[:6] + [3.0]))
        for name in ("cegb_penalty_feature_lazy", "cegb_penalty_feature_coupled", "cegb_penalty_feature_split"):
            if rng.random() < 0.4:
                params[name] = vector(VALUES)
        if rng.random() < 0.5:
            params["cegb_feature_group"] = vector(IDS)
            for name in ("cegb_penalty_group_lazy", "cegb_penalty_group_coupled"):
                if rng.random() < 0.6:
                    params[name] = [float(v) for v in rng.choice(VALUES[:5], size=int(rng.integers(0, 4)))]
        if rng.random() < 0.2:
            params["cegb_coupled_refresh"] = str(rng.choice(["split", "tree"]))
        return params

    refused = trained = 0
    for case in range(int(sys.argv[2])):
        kind = case % 3
        try:
            if kind == 0:  # parameters at construction
                lgb.train({**BASE, **cegb_params()}, lgb.Dataset(X, y), 3)
            elif kind == 1:  # resets between updates: a refused one leaves the booster as it was
                booster = lgb.Booster({**BASE, "cegb_penalty_feature_lazy": [1.0] * F, "cegb_tradeoff": 0.01},
                                      lgb.Dataset(X, y, params={"verbose": -1}))
                for _ in range(4):
                    try:
                        booster.reset_parameter(cegb_params())
                    except lgb.basic.LightGBMError:
                        refused += 1
                    booster.update()
            else:  # an init model whose trees split on features outside the data
                init = lgb.train(BASE, lgb.Dataset(X, y), 2).model_to_string()
                lines = []
                for line in init.splitlines():
                    if line.startswith("split_feature="):
                        features = line.split("=")[1].split()
                        line = "split_feature=" + " ".join(
                            str(int(rng.integers(0, F + 4))) if rng.random() < 0.5 else f for f in features)
                    lines.append(line)
                params = {**BASE, **cegb_params(), "cegb_penalty_feature_coupled": [1.0] * F}
                lgb.train(params, lgb.Dataset(X, y), 2, init_model=lgb.Booster(model_str="\\n".join(lines) + "\\n"))
            trained += 1
        except lgb.basic.LightGBMError:
            refused += 1
    print("CASES", trained, refused)
""")


@pytest.mark.skipif(ON_STOCK, reason="fuzzes the patch series' CEGB parameters")
@pytest.mark.parametrize("seed", [0, 1])
def test_random_cegb_parameters_resets_and_init_models_never_crash(seed, tmp_path):
    script = tmp_path / "fuzz.py"
    script.write_text(FUZZ)
    proc = run_python(f"import sys; sys.argv = ['fuzz', '{seed}', '{CASES}']; exec(open({str(script)!r}).read())",
                      timeout=1800)
    assert proc.returncode is not None, f"timed out: {proc.stderr}"
    assert proc.returncode == 0, \
        f"crashed (return code {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    trained, refused = (int(v) for v in proc.stdout.split("CASES")[1].split())
    assert trained > CASES // 10 and refused > CASES // 10, (trained, refused)  # both kinds of outcome reached
