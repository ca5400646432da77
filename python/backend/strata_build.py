"""The PEP 517 build backend of the strata Python package, standard library only.

build_wheel builds libstrata from the repository's Go sources with
`go build -buildmode=c-shared ./capi` (Go from $GO, else `go` on PATH; cgo needs a C compiler)
and packs it with python/strata into a platform wheel (PEP 427), so that the installed package
finds the library next to its files. Needing nothing but the standard library, the backend runs
in pip's isolated build environment without network access. No sdist: the package is built from
a checkout of the repository.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from typing import Dict, List, Optional

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
ROOT = os.path.dirname(PYTHON_DIR)  # the repository
PACKAGE = os.path.join(PYTHON_DIR, "strata")
MODULE = "github.com/stratakernels/strata"

# GOOS/GOARCH -> (wheel platform tag, library file name as strata._lib.library_name() has it).
PLATFORMS = {
    ("linux", "amd64"): ("linux_x86_64", "libstrata.so"),
    ("linux", "arm64"): ("linux_aarch64", "libstrata.so"),
    ("darwin", "arm64"): ("macosx_12_0_arm64", "libstrata.dylib"),
    ("darwin", "amd64"): ("macosx_12_0_x86_64", "libstrata.dylib"),
}


class BuildError(RuntimeError):
    pass


def _project() -> Dict[str, object]:
    """The [project] table of pyproject.toml. Before Python 3.11 (no tomllib) its lines are read
    as `key = value` with JSON values, which the strings and string lists there are."""
    path = os.path.join(PYTHON_DIR, "pyproject.toml")
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    project: Dict[str, object] = {}
    table = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                table = line
            elif table == "[project]" and "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                project[key.strip()] = json.loads(value.strip())
    return project


def _dist_name(project: Dict[str, object]) -> str:
    return f"{project['name']}-{project['version']}"


def _metadata(project: Dict[str, object]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project.get('description', '')}"]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    for dep in project.get("dependencies", []):  # type: ignore[union-attr]
        lines.append(f"Requires-Dist: {dep}")
    return "\n".join(lines) + "\n"


def _go() -> str:
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        raise BuildError("building libstrata needs Go (https://go.dev/dl): put `go` on PATH or set GO=/path/to/go")
    return go


def _platform(go: str) -> tuple:
    out = subprocess.run([go, "env", "GOOS", "GOARCH"], capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise BuildError(f"`{go} env GOOS GOARCH` failed:\n{out.stderr}")
    goos, goarch = out.stdout.split()
    if (goos, goarch) not in PLATFORMS:
        raise BuildError(f"no wheel platform for GOOS={goos} GOARCH={goarch} (have {sorted(PLATFORMS)})")
    return PLATFORMS[(goos, goarch)]


def _check_sources() -> None:
    try:
        with open(os.path.join(ROOT, "go.mod"), encoding="utf-8") as f:
            first = f.readline().split()
    except OSError:
        first = []
    if first != ["module", MODULE]:
        raise BuildError(f"{ROOT} is not the strata repository (no go.mod of {MODULE}): the package builds "
                         f"libstrata from the Go sources around python/, so install it from a checkout")


def _build_library(go: str, out: str) -> None:
    env = dict(os.environ, CGO_ENABLED="1")
    cmd = [go, "build", "-trimpath", "-buildmode=c-shared", "-o", out, "./capi"]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` failed in {ROOT} (cgo needs a C compiler):\n{res.stdout}{res.stderr}")


def _package_files() -> List[str]:
    """The package's own files, relative to python/ (no caches, no library left from a manual
    build: the wheel carries the one it builds)."""
    files = []
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py") or name == "py.typed":
            files.append(os.path.join("strata", name))
    return files


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _wheel_file(tag: str) -> str:
    return f"Wheel-Version: 1.0\nGenerator: strata_build\nRoot-Is-Purelib: false\nTag: {tag}\n"


# ---- PEP 517 hooks ---------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    project = _project()
    dist_info = _dist_name(project) + ".dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(project))
    return dist_info


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    project = _project()
    _check_sources()
    go = _go()
    plat, libname = _platform(go)
    tag = f"py3-none-{plat}"
    dist = _dist_name(project)
    wheel_name = f"{dist}-{tag}.whl"
    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, libname)
        _build_library(go, lib)
        entries = []
        for rel in _package_files():
            with open(os.path.join(PYTHON_DIR, rel), "rb") as f:
                entries.append((rel.replace(os.sep, "/"), f.read()))
        with open(lib, "rb") as f:
            entries.append((f"strata/{libname}", f.read()))
        dist_info = f"{dist}.dist-info"
        entries.append((f"{dist_info}/METADATA", _metadata(project).encode()))
        entries.append((f"{dist_info}/WHEEL", _wheel_file(tag).encode()))
        entries.append((f"{dist_info}/top_level.txt", b"strata\n"))
        record = [_record_line(name, data) for name, data in entries] + [f"{dist_info}/RECORD,,"]
        entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
        os.makedirs(wheel_directory, exist_ok=True)
        path = os.path.join(wheel_directory, wheel_name)
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in entries:
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if name.endswith((".so", ".dylib")) else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
    return wheel_name
