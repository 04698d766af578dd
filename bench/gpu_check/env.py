"""What bench/gpu_check.sh needs installed, and the wheels to carry to a GPU machine without PyPI.

usage:
  env.py missing                  requirements (pip syntax) of what does not import here, one line
  env.py download DIR [--cuda X.Y] [--python-version 3.12]
                                  wheels (no dependencies) of what a PyTorch image usually lacks,
                                  for Linux x86-64, into DIR (default CUDA: this machine's driver,
                                  else 13.0); gpu_check.sh installs DIR (default .whl, or
                                  $DI_WHEELS) without an index when it finds wheels there

CUPTI comes from pyproject's ``gpu`` extra, bounded by the driver's CUDA version: a libcupti
newer than the driver fails with CUPTI_ERROR_NOT_INITIALIZED, so cupti-python and its
nvidia-cuda-cupti release must not be newer than the driver (driver for CUDA 13.0: cupti-python
13.0.1, which takes the nvidia-cuda-cupti 13.0 that PyTorch brings).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NEEDED = {
    "numpy": "numpy",
    "numba": "numba",
    "polars": "polars",
    "pyarrow": "pyarrow",
    "orjson": "orjson",
    "jsonschema": "jsonschema",
    "rich": "rich",
    "pynvml": "nvidia-ml-py",
    "torch": "torch",
    "nvidia.nccl": "nvidia-nccl-cu{major}",
}
"""Module -> pip name of what the check imports (di record/ingest/analyze, the training loop, NCCL's
nccl.h for the plugin; {major}: the driver's CUDA major version)."""
CARRIED = (
    "polars",
    "polars-runtime-32",
    "orjson",
    "jsonschema",
    "jsonschema-specifications",
    "referencing",
    "rpds-py",
    "isal",
)
"""What a PyTorch image (nvidia-h200's, 2026-11) lacks of di's needs: about 54 MB of wheels with cupti-python."""
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def gpu_extra() -> list[str]:
    """pyproject's ``gpu`` extra, markers dropped (this script only runs where they hold)."""
    text = (REPO / "pyproject.toml").read_text()
    try:
        import tomllib
    except ImportError:  # Python 3.10: the extra is one line of quoted requirements
        import re

        line = re.search(r"^gpu = \[(.*)\]$", text, re.M)
        extra = re.findall(r'"([^"]+)"', line.group(1)) if line else []
    else:
        extra = tomllib.loads(text)["project"]["optional-dependencies"]["gpu"]
    return [r.split(";")[0].strip() for r in extra]


def driver_cuda() -> str | None:
    sys.path.insert(0, str(REPO))
    from di.capture.cupti import driver_cuda_version

    found = driver_cuda_version()
    return None if found == "?" else found


def cupti_requirements(cuda: str) -> list[str]:
    """The gpu extra bounded by the driver's CUDA version, and the libcupti wheel likewise."""
    major = int(cuda.split(".")[0])
    bound = f"<={cuda}.999"
    libcupti = "nvidia-cuda-cupti-cu12" if major == 12 else "nvidia-cuda-cupti"
    return [f"{req},{bound}" if req.startswith("cupti-python") else req for req in gpu_extra()] + [f"{libcupti}{bound}"]


def missing() -> list[str]:
    cuda = driver_cuda() or "13.0"
    out = []
    for module, pip in NEEDED.items():
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001  an import that fails for any reason is missing
            out.append(pip.format(major=cuda.split(".")[0]))
    try:
        importlib.import_module("cupti.cupti")
    except Exception:  # noqa: BLE001
        out += cupti_requirements(cuda)
    return out


def download(dest: str, cuda: str | None, python_version: str) -> int:
    cuda = cuda or driver_cuda() or "13.0"
    pinned = []
    for name in CARRIED:  # the versions di's tests ran with here, where installed
        try:
            pinned.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pinned.append(name)
    wanted = pinned + [r for r in cupti_requirements(cuda) if r.startswith("cupti-python")]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        *(f"--platform={p}" for p in PLATFORMS),
        "-d",
        dest,
        *wanted,
    ]
    print("  ".join(wanted), flush=True)
    rc = subprocess.call(cmd)
    size = sum(p.stat().st_size for p in Path(dest).glob("*.whl"))
    print(
        f"{dest}: {len(list(Path(dest).glob('*.whl')))} wheels, {size / 2**20:.1f} MiB (for CUDA {cuda}, Python {python_version})"
    )
    return rc


def main(argv: list[str]) -> int:
    if argv[:1] == ["missing"]:
        print(" ".join(missing()))
        return 0
    if argv[:1] == ["download"] and len(argv) >= 2:
        opts = dict(zip(argv[2::2], argv[3::2]))
        return download(argv[1], opts.get("--cuda"), opts.get("--python-version", "3.12"))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
