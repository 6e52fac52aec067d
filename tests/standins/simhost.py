# Test stand-in support code (not a real tool): the simulated host shared by the stand-ins in
# this directory (systemctl, journalctl, nvidia-smi, hf, uv, vllm) and helpers for the tests
# that drive them. Python 3 standard library only.
#
# The simulated host is the directory named by DEPLOYD_SIM_DIR:
#   calls.log            one JSON line per stand-in invocation {"tool", "argv", "time", ...}
#   units/UNIT           unit files (what deployd writes when its unit dir points here)
#   systemd/UNIT.json    the simulated systemd's state of a unit
#   cgroup/system.slice/UNIT/cgroup.procs   the pids of the unit's simulated cgroup
#   journal/UNIT.log     the unit's journal, plain text; journal/UNIT.jsonl the same with times
#   gpus.json            the simulated GPUs (optional; 8 H200-like GPUs by default)
#   gpu-procs/PID.json   "GPU memory" held by a live process {"gpus": [0, 1], "mib": 70000}
#   repos/ORG__NAME/     what `hf download ORG/NAME` fetches (manifest.json and/or plain files)
#   vllm-version         the "installed" vLLM version (`uv pip install` writes it)
#   FLAG files           behaviour switches, listed in README.md
#
# Nothing here is part of deployd; the stand-ins exist so that deployd's plans can run end to
# end on a machine without systemd, GPUs, Hugging Face or vLLM.

import base64
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import struct
import sys
import time
import uuid

SIM_ENV = "DEPLOYD_SIM_DIR"
HERE = os.path.dirname(os.path.realpath(__file__))
PYLIB = os.path.join(HERE, "pylib")
TOOLS = ("systemctl", "journalctl", "nvidia-smi", "hf", "uv", "vllm")

DEFAULT_GPU_COUNT = 8
DEFAULT_GPU_NAME = "NVIDIA H200"
DEFAULT_GPU_TOTAL_MIB = 143771
DEFAULT_GPU_BASELINE_MIB = 4
DEFAULT_DRIVER_VERSION = "570.133.20"
DEFAULT_CUDA_VERSION = "12.8"
DEFAULT_VLLM_INSTALLED = "0.15.1"
DEFAULT_VLLM_AVAILABLE = "0.16.0"


# ---------------------------------------------------------------- the simulated host directory

# A relative DEPLOYD_SIM_DIR is made absolute once, so that children started in another working
# directory (a unit's WorkingDirectory=) still find the simulated host.
if os.environ.get(SIM_ENV) and not os.path.isabs(os.environ[SIM_ENV]):
    os.environ[SIM_ENV] = os.path.abspath(os.environ[SIM_ENV])


def sim_dir(required=True):
    d = os.environ.get(SIM_ENV)
    if not d:
        if required:
            sys.stderr.write("test stand-in: %s is not set; this is a test stand-in, not the real "
                             "tool (see tests/standins/README.md)\n" % SIM_ENV)
            sys.exit(2)
        return None
    return d


def path(*parts):
    return os.path.join(sim_dir(), *parts)


def ensure_dir(p):
    os.makedirs(p, exist_ok=True)
    return p


def flag(name):
    """True when the behaviour switch file DEPLOYD_SIM_DIR/name exists."""
    return os.path.exists(path(name))


def read_flag(name, default=None):
    """The stripped content of a switch file, or `default` when it is absent."""
    try:
        with open(path(name)) as f:
            return f.read().strip()
    except OSError:
        return default


def read_number(name, default):
    value = read_flag(name)
    if value in (None, ""):
        return default
    try:
        return float(value)
    except ValueError:
        return default


def write_file(p, data, mode=None):
    """Atomic replace (write a temporary file, then rename)."""
    ensure_dir(os.path.dirname(p) or ".")
    tmp = "%s.tmp.%d" % (p, os.getpid())
    with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, p)


def read_json(p, default=None):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(p, obj):
    write_file(p, json.dumps(obj, indent=1, sort_keys=True) + "\n")


class Locked:
    """An exclusive flock on a lock file, as a context manager."""

    def __init__(self, p):
        self.p = p

    def __enter__(self):
        ensure_dir(os.path.dirname(self.p))
        self.fd = os.open(self.p, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def append_line(p, line):
    """Appends one line with a single O_APPEND write (lines from several writers never mix)."""
    ensure_dir(os.path.dirname(p))
    data = (line if line.endswith("\n") else line + "\n").encode("utf-8", "replace")
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def log_call(tool, argv=None, **extra):
    """Appends {"tool", "argv", "time", ...} to calls.log. Secret values never go in: callers pass
    argv already redacted and only the presence of tokens."""
    entry = {"tool": tool, "argv": list(sys.argv[1:] if argv is None else argv),
             "time": time.time(), "pid": os.getpid(), "cwd": os.getcwd()}
    entry.update(extra)
    append_line(path("calls.log"), json.dumps(entry, sort_keys=True))


def read_calls(sim, tool=None):
    """The entries of SIM/calls.log (for tests), optionally only those of one tool."""
    out = []
    try:
        with open(os.path.join(sim, "calls.log")) as f:
            for line in f:
                line = line.strip()
                if line:
                    entry = json.loads(line)
                    if tool is None or entry.get("tool") == tool:
                        out.append(entry)
    except OSError:
        pass
    return out


def exit_if_sim_gone():
    """Long-lived stand-in processes end themselves when their simulated host is deleted, so a
    test that failed to clean up does not leave them running forever."""
    d = os.environ.get(SIM_ENV)
    if d and not os.path.isdir(d):
        os._exit(0)


# ---------------------------------------------------------------- processes

def proc_read(pid, name):
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_stat(pid):
    """The fields of /proc/PID/stat after the comm, so that index k is field k+3; None if gone."""
    data = proc_read(pid, "stat")
    if not data:
        return None
    return data[data.rfind(b")") + 2:].split()


def proc_state(pid):
    st = proc_stat(pid)
    return st[0].decode() if st else None


def proc_start_time(pid):
    st = proc_stat(pid)
    return int(st[19]) if st else None  # field 22


def proc_pgid(pid):
    st = proc_stat(pid)
    return int(st[2]) if st else None  # field 5


def proc_ppid(pid):
    st = proc_stat(pid)
    return int(st[1]) if st else None  # field 4


def proc_comm(pid):
    data = proc_read(pid, "comm")
    return data.decode("utf-8", "replace").rstrip("\n") if data else None


def proc_argv(pid):
    data = proc_read(pid, "cmdline")
    if not data:
        return []
    parts = data.split(b"\0")
    while parts and parts[-1] == b"":
        parts.pop()
    return [p.decode("utf-8", "replace") for p in parts]


def pid_alive(pid, start_time=None):
    """Alive: exists, is not a zombie and (when given) has the recorded start time."""
    if not pid or pid <= 0:
        return False
    state = proc_state(pid)
    if state is None or state in ("Z", "X"):
        return False
    if start_time is not None and proc_start_time(pid) != start_time:
        return False
    return True


def all_pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def group_members(pgid):
    """Live processes whose process group is pgid (the simulated cgroup of a unit)."""
    if not pgid:
        return []
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st and int(st[2]) == pgid and st[0] not in (b"Z", b"X"):
            out.append(pid)
    return sorted(out)


def set_process_title(title):
    """What setproctitle does for vLLM: rewrites argv in place (so /proc/PID/cmdline and `ps`
    show the title) and the kernel's comm (15 characters) with prctl(PR_SET_NAME)."""
    raw = title.encode()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(raw[:15]), 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass
    try:
        st = proc_stat(os.getpid())
        arg_start, arg_end = int(st[45]), int(st[46])  # fields 48, 49
        size = arg_end - arg_start
        if 0 < size < 1 << 20:
            ctypes.memmove(arg_start, raw[:size - 1].ljust(size, b"\0"), size)
    except Exception:
        pass


def set_child_subreaper():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass


def sim_processes(sim):
    """Live processes (never the caller) whose environment carries DEPLOYD_SIM_DIR=sim: every
    process the stand-ins started for that simulated host, orphans included."""
    needle = ("%s=%s\0" % (SIM_ENV, os.path.abspath(sim))).encode()
    me = os.getpid()
    out = []
    for pid in all_pids():
        if pid == me:
            continue
        env = proc_read(pid, "environ")
        if env and (b"\0" + needle in b"\0" + env + b"\0") and pid_alive(pid):
            out.append(pid)
    return sorted(out)


def kill_sim_processes(sim, timeout=10.0):
    """Test cleanup: SIGKILLs every process of the simulated host (and each process group they
    lead) until none is left or the timeout passes. Returns the pids still alive. The systemctl
    supervisors go last, so that they reap what they adopted instead of leaving zombies."""
    deadline = time.monotonic() + timeout
    me_group = os.getpgrp()
    rounds = 0
    while True:
        pids = sim_processes(sim)
        if not pids or time.monotonic() >= deadline:
            return pids
        others = [p for p in pids if b"__sim-supervise__" not in (proc_read(p, "cmdline") or b"")]
        targets = others if others and rounds < 10 else pids
        rounds += 1
        for pid in targets:
            try:
                if os.getpgid(pid) == pid and pid != me_group and pid in others:
                    os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


def standins_path(exclude=(), into=None):
    """A directory for PATH with the stand-ins, less those in `exclude` (e.g. ("hf",) for the
    "hf missing" case): symlinks in `into` (created), or this directory when nothing is left out."""
    if not exclude:
        return HERE
    ensure_dir(into)
    for tool in TOOLS:
        if tool not in exclude:
            link = os.path.join(into, tool)
            if not os.path.lexists(link):
                os.symlink(os.path.join(HERE, tool), link)
    return into


def start_init(sim, env):
    """Starts the simulated host's init (systemctl's `__sim-init__`: services' supervisors are
    its children, not the children of whoever ran systemctl) unless it runs; waits until it
    listens. Stopped with the rest by kill_sim_processes."""
    sock = os.path.join(sim, "init.sock")
    if os.path.exists(sock):
        return
    os.makedirs(sim, exist_ok=True)
    subprocess.Popen([sys.executable, os.path.join(HERE, "systemctl"), "__sim-init__"], env=env,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.01)


def sim_env(sim, base=None, exclude=()):
    """The environment a test gives deployd (or a stand-in) for a simulated host; the host's
    init runs from then on."""
    env = dict(os.environ if base is None else base)
    tools = standins_path(exclude, os.path.join(sim, "bin-without-" + "-".join(exclude))
                          if exclude else None)
    env["PATH"] = tools + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["PYTHONPATH"] = PYLIB + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env[SIM_ENV] = os.path.abspath(sim)
    start_init(os.path.abspath(sim), env)
    return env


# ---------------------------------------------------------------- GPUs

def gpu_uuid(index):
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, "deployd-sim-gpu-%d" % index))


def load_gpus():
    """The simulated GPUs: a list of dicts (index, uuid, name, total_mib, baseline_mib,
    memory_na, pci_bus_id) from gpus.json, with defaults for what it leaves out."""
    cfg = read_json(path("gpus.json"), {}) or {}
    count = int(cfg.get("count", len(cfg.get("gpus") or []) or DEFAULT_GPU_COUNT))
    overrides = {int(g.get("index", i)): g for i, g in enumerate(cfg.get("gpus") or [])}
    gpus = []
    for i in range(count):
        o = overrides.get(i, {})
        gpus.append({
            "index": i,
            "uuid": o.get("uuid", gpu_uuid(i)),
            "name": o.get("name", cfg.get("name", DEFAULT_GPU_NAME)),
            "total_mib": int(o.get("memory_total_mib", cfg.get("memory_total_mib", DEFAULT_GPU_TOTAL_MIB))),
            "baseline_mib": int(o.get("baseline_mib", cfg.get("baseline_mib", DEFAULT_GPU_BASELINE_MIB))),
            "memory_na": bool(o.get("memory_used_na", cfg.get("memory_used_na", False))),
            "pci_bus_id": o.get("pci_bus_id", "00000000:%02X:00.0" % (0x18 + 0x11 * i)),
        })
    return gpus, cfg


def register_gpu_memory(pid, gpus, mib, name=None):
    """Declares that process `pid` holds `mib` MiB on each GPU index in `gpus` (mib may also be
    a list, one value per GPU). nvidia-smi lists it while the process lives."""
    entry = {"pid": pid, "gpus": list(gpus), "mib": mib, "start_time": proc_start_time(pid)}
    if name:
        entry["name"] = name
    write_json(path("gpu-procs", "%d.json" % pid), entry)


def unregister_gpu_memory(pid):
    try:
        os.unlink(path("gpu-procs", "%d.json" % pid))
    except OSError:
        pass


def gpu_holders():
    """(live, lingering): live holders [(pid, name, {gpu_index: mib})] and the memory of dead
    holders that is still counted because of gpus.json "release_lag_s"."""
    _, cfg = load_gpus()
    lag = float(cfg.get("release_lag_s", 0) or 0)
    d = path("gpu-procs")
    live, lingering = [], []
    try:
        names = sorted(os.listdir(d), key=lambda n: (len(n), n))  # numerically by pid
    except OSError:
        names = []
    now = time.time()
    for fn in names:
        if not fn.endswith(".json"):
            continue
        p = os.path.join(d, fn)
        e = read_json(p)
        if not e or "pid" not in e:
            continue
        pid = int(e["pid"])
        per_gpu = {}
        mib = e.get("mib", 0)
        for k, g in enumerate(e.get("gpus", [])):
            per_gpu[int(g)] = mib[k] if isinstance(mib, list) else mib
        if pid_alive(pid, e.get("start_time")):
            name = e.get("name")
            if not name:
                argv = proc_argv(pid)
                name = argv[0] if argv else (proc_comm(pid) or "?")
            live.append((pid, name, per_gpu))
            continue
        if lag > 0:
            dead_at = e.get("dead_at")
            if dead_at is None:
                e["dead_at"] = dead_at = now
                write_json(p, e)
            if now - dead_at < lag:
                lingering.append(per_gpu)
                continue
        try:
            os.unlink(p)
        except OSError:
            pass
    return live, lingering


def gpu_memory_used(exclude_pids=()):
    """{gpu_index: used MiB} = baseline + live holders + lingering memory, from one reading of
    gpu-procs; holders in exclude_pids are left out."""
    gpus, _ = load_gpus()
    live, lingering = gpu_holders()
    used = {g["index"]: g["baseline_mib"] for g in gpus}
    parts = [per_gpu for pid, _, per_gpu in live if pid not in exclude_pids] + lingering
    for per_gpu in parts:
        for i, m in per_gpu.items():
            if i in used and m is not None:
                used[i] += int(m)
    return used


# ---------------------------------------------------------------- safetensors and repositories

def safetensors_header(data_size, tensors=None, metadata=None):
    """A safetensors header (the 8-byte length and the JSON, padded with spaces to a multiple of
    8 as the safetensors writer does) for tensors occupying exactly `data_size` bytes.
    `tensors`: list of (name, dtype, shape, nbytes); by default two U8/F32 tensors."""
    if tensors is None:
        tensors = default_tensors("model.layers.0.mlp", data_size)
    header = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, dtype, shape, nbytes in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if offset != data_size:
        raise ValueError("tensors cover %d bytes, not %d" % (offset, data_size))
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    return struct.pack("<Q", len(raw)) + raw


def default_tensors(prefix, data_size):
    if data_size >= 8:
        return [(prefix + ".down_proj.weight", "U8", [data_size - 4], data_size - 4),
                (prefix + ".down_proj.weight_scale_2", "F32", [1], 4)]
    return [(prefix + ".down_proj.weight", "U8", [data_size], data_size)]


def safetensors_layout(total_size, prefix):
    """(header bytes, tensors) for a valid safetensors file of exactly total_size bytes."""
    data = max(total_size - 64, 0)
    for _ in range(20):
        tensors = default_tensors(prefix, data)
        header = safetensors_header(data, tensors)
        new = total_size - len(header)
        if new < 0:
            raise ValueError("a safetensors file of %d bytes is too small for its header" % total_size)
        if new == data:
            return header, tensors
        data = new
    raise ValueError("cannot lay out a safetensors file of %d bytes" % total_size)


def safetensors_expected_size(p):
    """8 + header length + the largest data offset, or raises ValueError (for tests)."""
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("shorter than 8 bytes")
        (n,) = struct.unpack("<Q", head)
        if n > 100 * 1024 * 1024:
            raise ValueError("HeaderTooLarge")
        raw = f.read(n)
        if len(raw) < n:
            raise ValueError("MetadataIncompleteBuffer")
    try:
        header = json.loads(raw)
    except ValueError:
        raise ValueError("InvalidHeaderDeserialization")
    end = 0
    for k, v in header.items():
        if k != "__metadata__":
            end = max(end, int(v["data_offsets"][1]))
    return 8 + n + end


def data_block(name):
    """64 KiB of deterministic bytes for a file's tensor data."""
    seed = hashlib.sha256(name.encode()).digest()
    out = bytearray()
    counter = 0
    while len(out) < 65536:
        out += hashlib.sha256(seed + counter.to_bytes(4, "little")).digest()
        counter += 1
    return bytes(out)


def short_hash(filename):
    """huggingface_hub's _short_hash: the name of a file's .incomplete in the download cache."""
    return base64.urlsafe_b64encode(hashlib.sha1(filename.encode()).digest()).decode()


def repo_key(repo):
    return repo.replace("/", "__")


def make_repo(sim, repo, files=(), shards=0, shard_size=1 << 20, prefix="model", config=None,
              revision=None):
    """Writes SIM/repos/ORG__NAME/manifest.json for the hf stand-in (for tests). `files`: list of
    {"name", "size"} or {"name", "content"}; `shards` safetensors shards of `shard_size` bytes
    named PREFIX-0000i-of-0000N.safetensors; a config.json is added unless given."""
    entries = list(files)
    names = {e["name"] for e in entries}
    if "config.json" not in names:
        entries.insert(0, {"name": "config.json", "content": json.dumps(config or {
            "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
            "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}, indent=2) + "\n"})
    manifest = {"files": entries}
    if shards:
        manifest["shards"] = {"count": shards, "size": shard_size, "prefix": prefix}
    if revision:
        manifest["revision"] = revision
    d = os.path.join(sim, "repos", repo_key(repo))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return d


class RepoFile:
    """One file `hf download` produces: its name, size, and a generator of its bytes."""

    def __init__(self, name, size, content=None, source=None, header=None, tensors=None):
        self.name, self.size = name, size
        self.content, self.source, self.header, self.tensors = content, source, header, tensors

    @property
    def lfs(self):
        return self.name.endswith(".safetensors") or self.size >= 10 * 1024 * 1024

    def chunks(self, offset=0, chunk=65536):
        """Yields the file's bytes from `offset` on."""
        if self.content is not None or self.source is not None:
            data = self.content
            if data is None:
                with open(self.source, "rb") as f:
                    data = f.read()
            for i in range(offset, len(data), chunk):
                yield data[i:i + chunk]
            return
        head = self.header or b""
        pos = offset
        if pos < len(head):
            yield head[pos:]
            pos = len(head)
        block = data_block(self.name)
        while pos < self.size:
            i = (pos - len(head)) % len(block)
            piece = block[i:i + min(chunk, self.size - pos)]
            yield piece
            pos += len(piece)


def repo_files(repo):
    """The files of a simulated repository, or None when it does not exist. Reads
    SIM/repos/ORG__NAME/manifest.json (and serves any other regular file there verbatim)."""
    d = path("repos", repo_key(repo))
    if not os.path.isdir(d):
        return None, None
    manifest = read_json(os.path.join(d, "manifest.json"), {}) or {}
    files = []
    for e in manifest.get("files", []):
        name = e["name"]
        if "content" in e:
            content = e["content"].encode() if isinstance(e["content"], str) else bytes(e["content"])
            files.append(RepoFile(name, len(content), content=content))
        elif name.endswith(".safetensors"):
            header, tensors = safetensors_layout(int(e["size"]), "model.%s" % os.path.splitext(os.path.basename(name))[0].replace("-", "_"))
            files.append(RepoFile(name, int(e["size"]), header=header, tensors=tensors))
        elif name == "model.safetensors.index.json" and "size" not in e:
            files.append(RepoFile(name, 0))  # generated below
        else:
            files.append(RepoFile(name, int(e.get("size", 0))))
    sh = manifest.get("shards")
    if sh:
        count, size, prefix = int(sh["count"]), int(sh["size"]), sh.get("prefix", "model")
        for i in range(1, count + 1):
            name = "%s-%05d-of-%05d.safetensors" % (prefix, i, count)
            header, tensors = safetensors_layout(size, "model.layers.%d.mlp" % (i - 1))
            files.append(RepoFile(name, size, header=header, tensors=tensors))
    for root, dirs, fns in os.walk(d):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for fn in fns:
            full = os.path.join(root, fn)
            rel = os.path.relpath(full, d)
            if rel == "manifest.json" or fn.startswith(".sim-"):
                continue
            files.append(RepoFile(rel, os.path.getsize(full), source=full))
    shards = [f for f in files if f.tensors is not None]
    index = [f for f in files if f.name == "model.safetensors.index.json"]
    if shards and (not index or index[0].size == 0 and index[0].content is None):
        weight_map, total = {}, 0
        for f in shards:
            for name, _, _, nbytes in f.tensors:
                weight_map[name] = f.name
                total += nbytes
        content = (json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map},
                              indent=2) + "\n").encode()
        files = [f for f in files if f.name != "model.safetensors.index.json"]
        files.append(RepoFile("model.safetensors.index.json", len(content), content=content))
    files.sort(key=lambda f: f.name)
    revision = manifest.get("revision") or hashlib.sha1(repo.encode()).hexdigest()
    return files, revision


def file_etag(f):
    """sha256 of the content for LFS files (as the Hub's etag), the git blob sha1 otherwise."""
    if f.lfs:
        h = hashlib.sha256()
    else:
        h = hashlib.sha1(b"blob %d\0" % f.size)
    for piece in f.chunks():
        h.update(piece)
    return h.hexdigest()


def errno_name(e):
    return errno.errorcode.get(e, str(e))


# ---------------------------------------------------------------- the simulated journal

def journal_files(unit):
    d = path("journal")
    return os.path.join(d, unit + ".jsonl"), os.path.join(d, unit + ".log")


def journal_append(unit, message, pid=1, ident="systemd", inv=""):
    """One journal entry for `unit`: a JSON line in journal/UNIT.jsonl (read by journalctl) and
    the bare message in journal/UNIT.log. `inv`: the unit's invocation the entry belongs to
    (journalctl -o json shows it as _SYSTEMD_INVOCATION_ID for the service's own lines, as
    INVOCATION_ID for systemd's, pid 1)."""
    jsonl, plain = journal_files(unit)
    rec = {"t": time.time(), "pid": pid, "id": ident, "unit": unit, "msg": message}
    if inv:
        rec["inv"] = inv
    append_line(jsonl, json.dumps(rec))
    append_line(plain, message)
