"""Child process of test_fuzz.py: reads mutated model texts and reports, case by case, what the forest
core and LightGBM do with each, so that the parent can tell whose crash or hang it was.

    python fuzz_worker.py CASES.json DATA.npz FIRST_CASE

For every case from FIRST_CASE on, one line per stage (flushed before the next stage starts):
    BEGIN i | OURS i accepted/refused | LGB i loaded/refused/skipped (after a refusal of ours) |
    LEAVES i match/mismatch | PRUNE i ok/refused | END i
"""

import json
import sys

import lightgbm as lgb
import numpy as np

from lightgbm_cegb import CEGBError, budget_prune
from lightgbm_cegb.io.lightgbm_text import read_text


def say(*words) -> None:
    print(*words, flush=True)


def main() -> None:
    cases = json.loads(open(sys.argv[1]).read())
    data = np.load(sys.argv[2])
    first = int(sys.argv[3])
    for i in range(first, len(cases)):
        case = cases[i]
        X = data[case["data"]]
        say("BEGIN", i)
        try:
            forest = read_text(case["text"])
            leaves = forest.apply(X)
            forest.cost(X, np.ones(forest.num_features), np.full(forest.num_features, 0.5), per_iteration=True)
            say("OURS", i, "accepted")
        except CEGBError as exc:
            forest = None
            say("OURS", i, "refused", str(exc)[:200].replace("\n", " "))
        booster = None
        if forest is None:  # refused: what LightGBM does with it (load it, refuse it, crash) is not ours to check,
            say("LGB", i, "skipped")  # and a crash there would cost a restart of this worker
        else:
            try:
                booster = lgb.Booster(model_str=case["text"])
                say("LGB", i, "loaded")
            except lgb.basic.LightGBMError:
                say("LGB", i, "refused")
        if forest is not None and booster is not None:
            if booster.num_feature() != X.shape[1]:
                say("LEAVES", i, "mismatch", "LightGBM reads", booster.num_feature(), "features")
            else:
                expected = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
                same = expected.shape == leaves.shape and (expected == leaves).all()
                say("LEAVES", i, "match" if same else "mismatch")
                if same and case["prune"]:
                    y = data[case["data"] + "_y"]
                    try:
                        budget_prune(booster, X, y, np.ones(X.shape[1]), 0.01)
                        say("PRUNE", i, "ok")
                    except CEGBError as exc:
                        say("PRUNE", i, "refused", str(exc)[:200])
        say("END", i)


if __name__ == "__main__":
    main()
