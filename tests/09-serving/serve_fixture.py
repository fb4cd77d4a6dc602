"""What chapter 09's Python tests share (test_openai_client.py, soak_serve.py): the paths of the
inferlab executable and of SmolLM2, a check that chapter 08's model and the Python packages are
installed (failing with `./inferlab setup` named), and `inferlab serve` started on a free loopback
port (tools/serve_process.py).

Environment: INFERLAB_EXE (default build/default/inferlab), INFERLAB_SMOLLM2_GGUF (default
models/SmolLM2-135M-Instruct.Q4_1.gguf); ctest sets both (tests/09-serving/CMakeLists.txt).
"""

import importlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.dont_write_bytecode = True

from serve_process import ServerProcess, default_inferlab_exe  # noqa: E402

EXE = default_inferlab_exe()
GGUF = os.environ.get("INFERLAB_SMOLLM2_GGUF", str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))


def require_installed(*modules):
    """Raises AssertionError naming `./inferlab setup` when the model, the executable or one of
    @p modules (PyPI packages of tools/python-requirements.txt) is missing."""
    problems = []
    if not Path(GGUF).is_file():
        problems.append(f"chapter 08's model {GGUF}")
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            problems.append(f"the Python package {name} (in {sys.executable})")
    if problems:
        raise AssertionError("not installed: " + ", ".join(problems) + ". Run ./inferlab setup (it installs the "
                             "model and tools/python-requirements.txt into build/venv)")
    if not Path(EXE).is_file():
        raise AssertionError(f"no inferlab executable at {EXE} (set INFERLAB_EXE or build it: "
                             "cmake --build build/default --target inferlab)")


def start_server(*extra_args):
    """`inferlab serve --model GGUF --port 0 EXTRA…`, listening; the model's id in the API is GGUF."""
    return ServerProcess(EXE, GGUF, extra_args)
