"""``GpuCheck(required=True)`` on a host whose GPU cannot be used: unhealthy, naming why.

Through the real NVML bindings (``pynvml`` from nvidia-ml-py): once with no NVML
library on the host at all, as on a machine without a driver, and once with a
``libnvidia-ml.so.1`` whose ``nvmlInit`` answers NVML's own "Driver Not Loaded"
code, as a host whose driver package is installed but whose kernel module is not.
Each runs in a child interpreter, since the bindings load the library once per
process.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from watchkeeper.supervise import GpuCheck, HealthStatus

pytest.importorskip("pynvml", reason="the gpu extra (nvidia-ml-py) is not installed")

#: Runs the check in a fresh interpreter and prints its result as JSON.
CHECK = """
import asyncio, json, sys
from watchkeeper.supervise import GpuCheck
result = asyncio.run(GpuCheck(required=sys.argv[1] == "required").run())
print(json.dumps({"status": result.status.value, "detail": result.detail, "data": result.data}))
"""
#: NVML's return code for a driver that is not loaded (nvml.h: NVML_ERROR_DRIVER_NOT_LOADED).
DRIVER_NOT_LOADED = 9
STUB_NVML = f"""
int nvmlInitWithFlags(unsigned int flags) {{ return {DRIVER_NOT_LOADED}; }}
int nvmlInit_v2(void) {{ return {DRIVER_NOT_LOADED}; }}
int nvmlShutdown(void) {{ return 0; }}
"""


def checked(mode: str, library_dir: Path | None = None) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if library_dir is not None:
        env["LD_LIBRARY_PATH"] = str(library_dir)
    done = subprocess.run(
        [sys.executable, "-c", CHECK, mode], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def no_nvml_here() -> bool:
    probe = (
        "import pynvml\n"
        "try:\n    pynvml.nvmlInit()\n"
        "except pynvml.NVMLError_LibraryNotFound:\n    print('absent')"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() == "absent"


@pytest.fixture
def driver_not_loaded(tmp_path: Path) -> Path:
    """A folder holding a ``libnvidia-ml.so.1`` that says the driver is not loaded."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in NVML library")
    source = tmp_path / "nvml.c"
    source.write_text(STUB_NVML)
    library = tmp_path / "libnvidia-ml.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return tmp_path


def test_a_required_gpu_without_the_nvml_library_is_unhealthy() -> None:
    if not no_nvml_here():
        pytest.skip("this host has an NVML library")
    required = checked("required")
    assert required["status"] == "unhealthy"
    assert required["data"] == {"present": False, "required": True}
    assert "NVML Shared Library Not Found" in str(required["detail"])
    assert "required" in str(required["detail"])
    # Without required, a host with no GPU is as healthy as ever.
    optional = checked("optional")
    assert (optional["status"], optional["data"]) == ("healthy", {"present": False})


def test_a_required_gpu_whose_driver_is_not_loaded_is_unhealthy(driver_not_loaded: Path) -> None:
    required = checked("required", driver_not_loaded)
    assert required["status"] == "unhealthy"
    assert "Driver Not Loaded" in str(required["detail"])
    assert required["data"] == {"present": False, "required": True}
    optional = checked("optional", driver_not_loaded)
    assert optional["status"] == "healthy"
    assert "Driver Not Loaded" in str(optional["detail"])


def test_a_required_gpu_without_the_bindings_is_unhealthy_and_says_what_to_install() -> None:
    result = asyncio.run(GpuCheck(required=True, loader=lambda: None).run())
    assert result.status is HealthStatus.UNHEALTHY
    assert "nvidia-ml-py" in result.detail
