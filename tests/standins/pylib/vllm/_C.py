# TEST STAND-IN for vLLM's compiled extension `vllm._C`, not the real one: importing it succeeds
# unless the simulated host in $DEPLOYD_SIM_DIR has the flag file vllm-abi-broken, in which case
# it fails like a vLLM wheel built against another torch ("undefined symbol").
import os as _os

if _os.path.exists(_os.path.join(_os.environ.get("DEPLOYD_SIM_DIR", "/nonexistent"), "vllm-abi-broken")):
    raise ImportError("/srv/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: "
                      "_ZN3c104cuda9SetDeviceEab")
