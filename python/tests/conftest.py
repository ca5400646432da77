import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from helpers import ROOT  # noqa: E402


@pytest.fixture(scope="session")
def libpath(tmp_path_factory):
    """libstrata: $STRATA_LIBRARY when set, else built once with go build -buildmode=c-shared."""
    env = os.environ.get("STRATA_LIBRARY")
    if env:
        return env
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH and STRATA_LIBRARY is not set: cannot build libstrata")
    out = tmp_path_factory.mktemp("lib") / "libstrata.so"
    res = subprocess.run([go, "build", "-buildmode=c-shared", "-o", str(out), "./capi"], cwd=ROOT,
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"building libstrata failed:\n{res.stdout}{res.stderr}")
    os.environ["STRATA_LIBRARY"] = str(out)
    return str(out)


@pytest.fixture(scope="session")
def strata(libpath):
    import strata as st
    st.library(libpath)
    return st


@pytest.fixture(scope="session")
def device(strata):
    d = strata.Device("cpu")
    yield d
    d.close()


@pytest.fixture(scope="session")
def model(strata, device):
    from helpers import TINY_Q4
    m = strata.Model(device, TINY_Q4)
    yield m
    m.close()


@pytest.fixture(scope="session")
def q4_goldens():
    from helpers import GOLDENS, read_safetensors
    return read_safetensors(os.path.join(GOLDENS, "q4_model_goldens.safetensors"))


@pytest.fixture(scope="session", params=["cpu", "emu"])
def op_device(request, strata):
    """The device the op tests run on: cpu, and emu (the Metal kernels on the MSL emulator),
    which needs clang++ (Debian clang-16)."""
    if request.param == "emu" and not (os.environ.get("STRATA_CLANG") or shutil.which("clang++-16") or shutil.which("clang++")):
        pytest.skip("the emu backend needs clang++ (Debian clang-16)")
    d = strata.Device(request.param)
    yield d
    d.close()
