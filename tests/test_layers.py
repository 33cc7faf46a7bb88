"""The package's architecture, enforced: parts import only parts below them, the module graph has no cycle,
and no module (of the package or of scripts/) imports another module's private names; no script edits sys.path;
the core imports no LightGBM.

Every import counts, function-level ones included. The layers (lowest first):

====  ===================================================  ===================================================
rank  parts                                                what
====  ===================================================  ===================================================
0     ``_engine``, ``_budgetrf``, ``_prune``, ``_cstc``,   compiled kernels (cython_ext/); ``_version``
      ``_lgbtext``, ``_acquisition``
1     ``core``                                             cost model, Forest, CostState, CostReport, scales
2     ``io``, ``datasets``                                 model readers and writers, saved models; data
3     ``accounting``, ``base``                             prediction_cost of any model; the estimator contract
4     ``lgbm``, ``serving``                                CEGB on LightGBM; lazy acquisition
5     ``methods``                                          the methods of the papers
6     ``selection``                                        sweeps, frontiers, selection under a budget
7     ``cli``, ``demo``, ``__init__``                      entry points
====  ===================================================  ===================================================

A part imports itself or parts of a lower rank only (two parts of one rank never import each other).

No module reads another module's private member: an attribute ``x._name`` (``x`` not ``self``, ``cls`` or
``super()``) whose name a module of the package defines is read only by a module that defines it too (a subclass's
hook, a protocol both sides implement), or by a declared friend of the module defining it (:data:`FRIENDS`: two
modules that are one private pair behind a public face).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "lightgbm_cegb"
RANK = {"_version": 0, "_engine": 0, "_lgbtext": 0, "_budgetrf": 0, "_prune": 0, "_cstc": 0, "core": 1,
        "io": 2, "datasets": 2, "accounting": 3, "base": 3, "lgbm": 4, "serving": 4, "methods": 5, "selection": 6,
        "cli": 7, "demo": 7, "__init__": 7}


#: (module, module whose private members it reads): why the two are one private pair behind a public face
FRIENDS = {
    ("lightgbm_cegb.methods.staged", "lightgbm_cegb.methods.acquisition"):
        "the classifier's ladder run (StagedRun) answers by acquisition.PolicyClassifier's run hooks (_output, "
        "_result)",
    ("lightgbm_cegb.methods.ladder", "lightgbm_cegb.methods.acquisition"):
        "the staged ladder's runs drive a model by acquisition.PolicyClassifier's run hooks (_pay, _check_policy), "
        "which the ranker and the regressor implement too",
    ("lightgbm_cegb.serving.runs", "lightgbm_cegb.serving.lazy"):
        "the runs are LazyPredictor's per-request state, apart only to keep lazy.py readable; "
        "serving.lazy.LazyPredictor is their public face",
    ("lightgbm_cegb.serving.prepared", "lightgbm_cegb.serving.lazy"):
        "a PreparedRow is LazyPredictor's one-row request state (its plan, fetch keys and fetch round), made by "
        "LazyPredictor.prepare, apart only to keep lazy.py readable",
}


def private_names(tree: ast.AST) -> set[str]:
    """The private names (not dunders) a module defines: functions, classes, attributes and variables it assigns."""
    out = set()
    for node in ast.walk(tree):
        name = None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            name = node.attr
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = node.id
        if name and name.startswith("_") and not name.startswith("__"):
            out.add(name)
    return out


def private_reads(trees: dict[str, ast.AST]) -> list[str]:
    """Every read of another module's private member in the modules ``trees`` (module -> its AST); see the doc."""
    defined = {module: private_names(tree) for module, tree in trees.items()}
    anywhere = set().union(*defined.values())
    found = []
    for module, tree in trees.items():
        allowed = defined[module].union(*(defined.get(other, set()) for mine, other in FRIENDS if mine == module))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls") or isinstance(owner, ast.Call) and \
                    isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            if node.attr in anywhere and node.attr not in allowed:
                where = sorted(other for other, names in defined.items() if node.attr in names)
                found.append(f"{module}:{node.lineno} reads the private member {ast.unparse(node)} (defined in "
                             f"{', '.join(where)})")
    return found


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path, module: str, is_package: bool) -> list[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) for every import of ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[:len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((base, [alias.name for alias in node.names], node.lineno))
    return out


def part_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def violations(root: Path, scripts: Path | None = None) -> list[str]:
    """Every breach of the rules in the package under ``root`` (and private imports in ``scripts``)."""
    found, graph = [], {}
    files = {module_name(p, root): p for p in (root / PACKAGE).rglob("*.py")}
    for module, path in sorted(files.items()):
        part = part_of(module)
        if part not in RANK:
            found.append(f"{module}: part {part!r} has no layer (add it to RANK in tests/test_layers.py)")
            continue
        graph[module] = set()
        for target, names, line in imports(path, module, path.name == "__init__.py"):
            if part == "core" and target.split(".")[0] == "lightgbm":
                found.append(f"{module}:{line} imports {target}: the core does not depend on LightGBM")
            if not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                continue
            # "from package.part import name" may name a submodule: count it as that module
            targets = [f"{target}.{n}" if f"{target}.{n}" in files else target for n in names] or [target]
            for name, full in zip(names or [None], targets):
                if full != module and full in files:
                    graph[module].add(full)
                other = part_of(full)
                if other != part and RANK.get(other, 99) >= RANK[part]:
                    found.append(f"{module}:{line} imports {full} ({other}, rank {RANK.get(other)}) from "
                                 f"{part} (rank {RANK[part]})")
                if name and name.startswith("_") and full != module and not name.startswith("__") \
                        and f"{target}.{name}" not in files:
                    found.append(f"{module}:{line} imports the private name {name} of {target}")
    if scripts is not None:
        for path in sorted(scripts.rglob("*.py")):
            name = f"scripts/{path.relative_to(scripts).as_posix()}"
            for target, names, line in imports(path, path.stem, False):
                if target.startswith(PACKAGE):
                    found += [f"{name}:{line} imports the private name {n} of {target}"
                              for n in names if n.startswith("_") and not n.startswith("__")]
                    found += [f"{name}:{line} imports the private module {target}"
                              for part in target.split(".")[1:] if part.startswith("_")]
            # the scripts are modules of the package scripts (python -m scripts.NAME): none finds its imports
            # by editing the search path
            found += [f"{name}:{node.lineno} edits sys.path" for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, ast.Attribute) and node.attr == "path"
                      and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    found += [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]
    found += private_reads({module: ast.parse(path.read_text(), str(path)) for module, path in sorted(files.items())})
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (or a self-loop)."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component) + [sorted(component)[0]])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_keeps_its_layers():
    assert violations(ROOT, ROOT / "scripts") == []


@pytest.fixture
def copy(tmp_path):
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("*.so", "__pycache__", "data"))
    return tmp_path


def plant(root: Path, module: str, line: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n\ndef _planted():\n    {line}\n")


def test_a_planted_upward_import_fails(copy):
    plant(copy, "lightgbm_cegb.core.costs", "from lightgbm_cegb.selection import sweep")
    found = violations(copy)
    assert any("core.costs" in v and "selection" in v and "rank 6" in v for v in found), found
    assert any(v.startswith("import cycle") for v in found), found


def test_a_planted_lightgbm_import_in_the_core_fails(copy):
    plant(copy, "lightgbm_cegb.core.forest", "from lightgbm.basic import _data_from_pandas")
    line = len((copy / PACKAGE / "core" / "forest.py").read_text().splitlines())
    assert violations(copy) == [f"lightgbm_cegb.core.forest:{line} imports lightgbm.basic: the core does not "
                                "depend on LightGBM"]


def test_a_planted_cycle_within_a_part_fails(copy):
    plant(copy, "lightgbm_cegb.core.errors", "from lightgbm_cegb.core.forest import Forest")
    found = violations(copy)
    assert found and all(v.startswith("import cycle") for v in found), found
    assert any("lightgbm_cegb.core.errors" in v and "lightgbm_cegb.core.forest" in v for v in found), found


def test_methods_never_import_selection_and_private_names_are_refused(copy, tmp_path):
    plant(copy, "lightgbm_cegb.methods.greedy_miser", "from lightgbm_cegb.selection.metrics import get_metric")
    plant(copy, "lightgbm_cegb.methods.budgetrf", "from lightgbm_cegb.methods.cstc.cstc_estimators import _plain")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "x.py").write_text("from lightgbm_cegb.io.models import _read\n")
    (scripts / "build").mkdir()
    (scripts / "build" / "y.py").write_text("import sys\n\nsys.path.insert(0, 'scripts')\n")
    found = violations(copy, scripts)
    assert any("methods.greedy_miser" in v and "selection" in v for v in found), found
    assert any("private name _plain" in v for v in found), found
    assert any("scripts/x.py" in v and "_read" in v for v in found), found
    assert "scripts/build/y.py:3 edits sys.path" in found, found


def test_a_planted_read_of_another_modules_private_member_fails(copy):
    plant(copy, "lightgbm_cegb.selection.chosen", "return BudgetedEstimator()._saved_parts()")
    plant(copy, "lightgbm_cegb.methods.budgetrf", "return self.model._saved_state()")  # it defines its own: a hook
    found = violations(copy)
    line = len((copy / PACKAGE / "selection" / "chosen.py").read_text().splitlines())
    assert found == [f"lightgbm_cegb.selection.chosen:{line} reads the private member BudgetedEstimator()._saved_parts "
                     "(defined in lightgbm_cegb.base)"], found


def test_every_friend_pair_is_needed():
    """A declared pair whose first module reads nothing private of the second is stale: remove it."""
    trees = {module_name(p, ROOT): ast.parse(p.read_text()) for p in (ROOT / PACKAGE).rglob("*.py")}
    for mine, other in FRIENDS:
        theirs = private_names(trees[other]) - private_names(trees[mine])
        reads = {node.attr for node in ast.walk(trees[mine]) if isinstance(node, ast.Attribute)}
        assert reads & theirs, f"{mine} reads no private member of {other}: remove the pair"


def test_no_two_modules_share_a_file_name():
    """A file name finds its module (package __init__ files aside)."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        if path.name != "__init__.py":
            names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}


def test_a_long_module_says_why():
    """A module of the package over 600 lines says why in its docstring ("Its length: ...")."""
    long = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 600 and "Its length:" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(str(path.relative_to(ROOT)))
    assert long == []
