# TEST STAND-IN for the `vllm` Python package, not the real one: with
# PYTHONPATH=tests/standins/pylib, `python3 -c 'import vllm; print(vllm.__version__)'` prints the
# version installed on the simulated host in $DEPLOYD_SIM_DIR (the file vllm-version that the uv
# stand-in writes; 0.15.1 when absent). Reproduces: the version check after
# `uv pip install --upgrade vllm`; a missing package (flag file vllm-missing: ModuleNotFoundError);
# a broken binary build (flag vllm-abi-broken: `import vllm._C` fails with "undefined symbol").
import os as _os

_sim = _os.environ.get("DEPLOYD_SIM_DIR")
if not _sim:
    raise ImportError("vllm test stand-in (tests/standins/pylib): DEPLOYD_SIM_DIR is not set")
if _os.path.exists(_os.path.join(_sim, "vllm-missing")):
    raise ModuleNotFoundError("No module named 'vllm'", name="vllm")


def _read_version():
    try:
        with open(_os.path.join(_sim, "vllm-version")) as f:
            return f.read().strip() or "0.15.1"
    except OSError:
        return "0.15.1"


__version__ = _read_version()
__version_tuple__ = tuple(int(p) if p.isdigit() else p for p in __version__.replace("rc", ".rc").split("."))
__all__ = ["__version__"]
