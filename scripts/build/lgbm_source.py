#!/usr/bin/env python3
"""The patched LightGBM: fetch the pinned sdist, apply ``patches/series``, build, refresh patches.

Sub-commands (standard library only, so it runs before any virtual environment exists):

``fetch``
    Download ``lightgbm==4.7.0`` (the sdist) and the stock wheel into the cache with pip and check both
    against the pinned sha256 sums below.
``unpack DIR``
    Unpack the pristine sdist into DIR as a git repository: one commit ``upstream``, then one commit per
    patch of the series (applied with ``patch -p1 --fuzz=0``; any reject stops loudly).
``refresh DIR``
    Regenerate every patch file from DIR's commits. Uncommitted changes are folded into the last patch,
    as ``quilt refresh`` does; a new commit whose subject is ``NNNN-name.patch`` becomes a new patch and
    is appended to the series. Each commit's message is the patch header.
``build``
    Build the patched Python wheel (``lightgbm.__version__ == "4.7.0+cegb.N"``) and the patched
    ``lightgbm`` command-line program in one CMake build, cached under a key made of the sdist hash,
    the series and the patch contents, and the build recipe. Prints the cache directory.

The cache lives in ``$LIGHTGBM_CEGB_CACHE`` (default ``~/.cache/lightgbm-cegb``), outside the clone, so
it survives between clones and CI runs on one machine.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

UPSTREAM_VERSION = "4.7.0"
SDIST_NAME = f"lightgbm-{UPSTREAM_VERSION}.tar.gz"
SDIST_SHA256 = "f8e20f682c9aabd000bcf4a7ed8aa6f473c1adfecccae34ec24e823d156f4af0"
STOCK_WHEEL_NAME = f"lightgbm-{UPSTREAM_VERSION}-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
STOCK_WHEEL_SHA256 = "d23e922acd891e77212e4d0fbcee9ba973c96dee479491341d05ba595357ebb7"
# Bump when the way artifacts are built changes (flags, targets, wheel layout): it is part of the cache key.
BUILD_RECIPE = "cmake-release-cli+lib-v1"

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "patches"
PATCH_NAME = re.compile(r"^\d{4}-[A-Za-z0-9._-]+\.patch$")


class SourceError(RuntimeError):
    """A problem with the upstream source, the patch series or the build."""


def cache_dir() -> Path:
    path = Path(os.environ.get("LIGHTGBM_CEGB_CACHE", Path.home() / ".cache" / "lightgbm-cegb"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def log(msg: str) -> None:
    print(f"[lgbm_source] {msg}", file=sys.stderr, flush=True)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kwargs)


# --------------------------------------------------------------------------------------------- series


def read_series(patches: Path = PATCHES) -> tuple[int, list[str]]:
    """Return (series version, patch names) from ``patches/series``.

    The file lists one patch per line; ``#`` starts a comment; a ``# version: N`` line gives the series'
    version, which becomes the ``+cegb.N`` local version of the built wheel.
    """
    version = None
    names = []
    series = patches / "series"
    for lineno, raw in enumerate(series.read_text().splitlines(), 1):
        line = raw.strip()
        match = re.match(r"#\s*version:\s*(\d+)\s*$", line)
        if match:
            version = int(match.group(1))
            continue
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if not PATCH_NAME.match(line):
            raise SourceError(f"{series}:{lineno}: expected a patch name like 0001-name.patch, got {line!r}")
        if not (patches / line).is_file():
            raise SourceError(f"{series}:{lineno}: patch file {line} does not exist")
        names.append(line)
    if version is None:
        raise SourceError(f"{series}: no '# version: N' line")
    return version, names


def series_key() -> str:
    """Cache key: sdist hash + series + every patch's bytes + build recipe."""
    _, names = read_series()
    digest = hashlib.sha256()
    for part in (SDIST_SHA256, BUILD_RECIPE, (PATCHES / "series").read_text()):
        digest.update(part.encode() + b"\0")
    for name in names:
        digest.update(name.encode() + b"\0" + (PATCHES / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- fetch


def _fetch(name: str, sha256: str, pip_args: list[str]) -> Path:
    dest = cache_dir() / "downloads"
    path = dest / name
    if not path.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        log(f"downloading {name}")
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                 "-q", "-d", tmp, *pip_args, f"lightgbm=={UPSTREAM_VERSION}"])
            got = Path(tmp) / name
            if not got.is_file():
                raise SourceError(f"pip did not produce {name}; it produced {sorted(os.listdir(tmp))}")
            os.replace(got, path)
    actual = sha256_file(path)
    if actual != sha256:
        raise SourceError(f"{path}: sha256 mismatch: expected {sha256}, got {actual}. "
                          "Delete the file to download it again.")
    return path


def fetch_sdist() -> Path:
    return _fetch(SDIST_NAME, SDIST_SHA256, ["--no-binary", "lightgbm"])


def fetch_stock_wheel() -> Path:
    """The unmodified upstream wheel, used by the tests to show each upstream bug on stock LightGBM."""
    return _fetch(STOCK_WHEEL_NAME, STOCK_WHEEL_SHA256, ["--only-binary", ":all:"])


def stock_package_dir() -> Path:
    """The stock wheel unpacked: a directory to put first on PYTHONPATH to import stock ``lightgbm``."""
    return unpacked_wheel(fetch_stock_wheel(), cache_dir() / f"stock-{STOCK_WHEEL_SHA256[:16]}")


def unpacked_wheel(wheel: Path, target: Path) -> Path:
    """``wheel`` unpacked into ``target`` (once): a directory to put first on PYTHONPATH."""
    if not (target / "lightgbm" / "__init__.py").is_file():
        tmp = Path(tempfile.mkdtemp(dir=cache_dir()))
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)
        for member in tmp.rglob("*.so*"):
            member.chmod(0o755)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    return target


# ------------------------------------------------------------------------------------ unpack and apply


def _git(repo: Path, *args: str, capture: bool = False) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="lightgbm-cegb", GIT_AUTHOR_EMAIL="lightgbm-cegb@localhost",
               GIT_COMMITTER_NAME="lightgbm-cegb", GIT_COMMITTER_EMAIL="lightgbm-cegb@localhost")
    out = run(["git", "-C", str(repo), *args], env=env, text=True,
              stdout=subprocess.PIPE if capture else subprocess.DEVNULL)
    return out.stdout if capture else ""


def extract_sdist(dest: Path) -> None:
    """Unpack the verified sdist so that DEST is its root (``src/``, ``include/``, ``lightgbm/`` ...)."""
    sdist = fetch_sdist()
    prefix = f"lightgbm-{UPSTREAM_VERSION}/"
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            if not member.name.startswith(prefix):
                raise SourceError(f"unexpected path in sdist: {member.name}")
            member.name = member.name[len(prefix):]
            if member.name:
                members.append(member)
        tar.extractall(dest, members=members, filter="data")


def split_patch(text: str) -> tuple[str, str]:
    """Split a patch file into (header, diff): the diff starts at the first ``diff --git`` or ``--- `` line;
    the header is the text before it, without the ``---`` line that separates the two."""
    match = re.search(r"^(diff --git |--- )", text, flags=re.M)
    if match is None:
        raise SourceError("patch has no diff")
    header = re.sub(r"(?m)^---\n\Z", "", text[: match.start()])
    return header, text[match.start():]


def apply_series(tree: Path, commit: bool = False, patches: Path = PATCHES) -> None:
    _, names = read_series(patches)
    for name in names:
        log(f"applying {name}")
        proc = subprocess.run(["patch", "-p1", "--fuzz=0", "--batch", "--forward", "--no-backup-if-mismatch",
                               "-d", str(tree), "-i", str(patches / name)],
                              text=True, capture_output=True)
        if proc.returncode != 0:
            raise SourceError(f"{name} does not apply with --fuzz=0:\n{proc.stdout}{proc.stderr}")
        if commit:
            header, _ = split_patch((patches / name).read_text())
            _git(tree, "add", "-A")
            _git(tree, "commit", "-q", "-m", f"{name}\n\n{header.strip()}\n")


def unpack(dest: Path, patches: Path = PATCHES) -> None:
    if dest.exists() and any(dest.iterdir()):
        raise SourceError(f"{dest} exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    extract_sdist(dest)
    _git(dest, "init", "-q")
    # a CMake build inside the work tree (build/, lib_lightgbm.so) is not part of any patch
    (dest / ".git" / "info" / "exclude").write_text("/build/\n/lib_lightgbm.so\n")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "upstream")
    apply_series(dest, commit=True, patches=patches)
    log(f"unpacked into {dest}: edit, then 'git commit' (or leave changes uncommitted) and run refresh")


# -------------------------------------------------------------------------------------------- refresh


def refresh(tree: Path, patches: Path = PATCHES) -> None:
    log_out = _git(tree, "log", "--reverse", "--format=%H", capture=True).split()
    if not log_out:
        raise SourceError(f"{tree} has no commits; create it with 'unpack'")
    upstream, patch_commits = log_out[0], log_out[1:]
    if _git(tree, "log", "-1", "--format=%s", upstream, capture=True).strip() != "upstream":
        raise SourceError(f"{tree}: the first commit must be 'upstream'")
    dirty = bool(_git(tree, "status", "--porcelain", capture=True).strip())
    if dirty:
        if not patch_commits:
            raise SourceError("uncommitted changes but no patch commit to fold them into: commit them "
                              "with the subject 'NNNN-name.patch' and a DEP-3 header as the message")
        _git(tree, "add", "-A")
        _git(tree, "commit", "-q", "--amend", "--no-edit")
        patch_commits[-1] = _git(tree, "rev-parse", "HEAD", capture=True).strip()
    version, _ = read_series(patches)
    names = []
    for sha in patch_commits:
        subject = _git(tree, "log", "-1", "--format=%s", sha, capture=True).strip()
        body = _git(tree, "log", "-1", "--format=%b", sha, capture=True).strip()
        if not PATCH_NAME.match(subject):
            raise SourceError(f"commit {sha[:10]}: subject must be a patch name like 0002-name.patch, "
                              f"got {subject!r}")
        if not body.startswith("Description:"):
            raise SourceError(f"commit {sha[:10]} ({subject}): message body must be a DEP-3 header "
                              "starting with 'Description:'")
        diff = _git(tree, "diff", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/",
                    f"{sha}~1", sha, capture=True)
        write_atomic(patches / subject, f"{body}\n---\n{diff}")
        names.append(subject)
    stale = {p.name for p in patches.glob("*.patch")} - set(names)
    for name in sorted(stale):
        log(f"warning: {name} is no longer in the series; delete it if that is intended")
    lines = [f"# version: {version}", "# Applied in order with patch -p1 --fuzz=0 (scripts/build/lgbm_source.py).",
             *names]
    write_atomic(patches / "series", "\n".join(lines) + "\n")
    log(f"refreshed {len(names)} patch(es); bump '# version:' in patches/series when the series changes")


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------- build


def _record_line(arcname: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [arcname, f"sha256={digest}", str(len(data))]


def make_wheel(src: Path, lib: Path, local_version: str, out_dir: Path) -> Path:
    """Write a wheel of the sdist's Python package with the freshly built ``lib_lightgbm.so``."""
    dist = "lightgbm"
    info = f"{dist}-{local_version}.dist-info"
    tag = "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
    metadata = re.sub(r"^Version: .*$", f"Version: {local_version}", (src / "PKG-INFO").read_text(),
                      count=1, flags=re.M)
    files: dict[str, bytes] = {}
    for path in sorted((src / "lightgbm").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(src).as_posix()] = path.read_bytes()
    files["lightgbm/VERSION.txt"] = (local_version + "\n").encode()
    files["lightgbm/lib/lib_lightgbm.so"] = lib.read_bytes()
    files[f"{info}/METADATA"] = metadata.encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: lightgbm-cegb ({BUILD_RECIPE})\n"
                              f"Root-Is-Purelib: false\nTag: {tag}\n").encode()
    files[f"{info}/licenses/LICENSE"] = (src / "LICENSE").read_bytes()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in files.items():
        writer.writerow(_record_line(name, data))
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = record.getvalue().encode()
    wheel = out_dir / f"{dist}-{local_version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zinfo = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            zinfo.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            zinfo.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zinfo, data)
    return wheel


# AddressSanitizer and UBSan (every undefined behaviour fatal), with frames for readable reports
SANITIZE_FLAGS = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"


def build(jobs: int, sanitize: bool = False) -> Path:
    """The patched wheel and CLI (``sanitize``: built with AddressSanitizer and UBSan, cached apart)."""
    version, _ = read_series()
    key = series_key() + ("-asan" if sanitize else "")
    out = cache_dir() / f"build-{key}"
    if (out / "DONE").is_file():
        log(f"cached build {out}")
        return out
    local_version = f"{UPSTREAM_VERSION}+cegb.{version}"
    work = Path(tempfile.mkdtemp(prefix=f"build-{key}-", dir=cache_dir()))
    try:
        src = work / "src"
        src.mkdir()
        extract_sdist(src)
        apply_series(src)
        bld = work / "cmake"
        log(f"configuring {local_version} (cmake, Release, CLI on{', sanitizers' if sanitize else ''})")
        # the CLI goes to bld/bin: the sdist root already holds the Python package directory 'lightgbm'
        run(["cmake", "-S", str(src), "-B", str(bld), "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_CLI=ON",
             "-DINSTALL_HEADERS=OFF", f"-DCMAKE_RUNTIME_OUTPUT_DIRECTORY={bld / 'bin'}",
             *([f"-DCMAKE_CXX_FLAGS={SANITIZE_FLAGS}", f"-DCMAKE_C_FLAGS={SANITIZE_FLAGS}",
                f"-DCMAKE_SHARED_LINKER_FLAGS={SANITIZE_FLAGS}", f"-DCMAKE_EXE_LINKER_FLAGS={SANITIZE_FLAGS}"]
               if sanitize else [])],
            stdout=subprocess.DEVNULL)
        log(f"compiling with {jobs} job(s): a few minutes on 2 cores")
        run(["cmake", "--build", str(bld), "--parallel", str(jobs), "--target", "_lightgbm", "lightgbm"],
            stdout=subprocess.DEVNULL)
        stage = work / "out"
        stage.mkdir()
        make_wheel(src, src / "lib_lightgbm.so", local_version, stage)
        shutil.copy2(bld / "bin" / "lightgbm", stage / "lightgbm")
        (stage / "VERSION").write_text(local_version + "\n")
        (stage / "DONE").write_text(key + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(stage, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"built {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="download and verify the sdist and the stock wheel")
    sub.add_parser("stock", help="print a directory holding the stock (unpatched) lightgbm package")
    p_unpack = sub.add_parser("unpack", help="pristine sdist + series as a git work tree")
    p_unpack.add_argument("dir", type=Path)
    p_unpack.add_argument("--patches", type=Path, default=PATCHES, help="patch directory (default: %(default)s)")
    p_refresh = sub.add_parser("refresh", help="regenerate patches/ from a work tree made by unpack")
    p_refresh.add_argument("dir", type=Path)
    p_refresh.add_argument("--patches", type=Path, default=PATCHES, help="patch directory (default: %(default)s)")
    p_build = sub.add_parser("build", help="build (or reuse) the patched wheel and CLI; print their directory")
    p_build.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    p_build.add_argument("--sanitize", action="store_true",
                         help="with AddressSanitizer and UBSan; prints a directory to put first on PYTHONPATH")
    sub.add_parser("key", help="print the cache key of the current series")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch_sdist())
            print(fetch_stock_wheel())
        elif args.cmd == "stock":
            print(stock_package_dir())
        elif args.cmd == "unpack":
            unpack(args.dir, args.patches)
        elif args.cmd == "refresh":
            refresh(args.dir, args.patches)
        elif args.cmd == "build":
            out = build(args.jobs, args.sanitize)
            print(unpacked_wheel(next(out.glob("lightgbm-*.whl")), out / "package") if args.sanitize else out)
        elif args.cmd == "key":
            print(series_key())
    except (SourceError, subprocess.CalledProcessError) as exc:
        log(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
