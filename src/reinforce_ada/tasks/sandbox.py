"""Run untrusted Python (model-written code) in a throwaway sandbox built on bubblewrap or unshare(1).

What a sandboxed program gets, with either tool:
1) its own user, pid, network, mount, IPC and UTS namespaces: it sees only its own processes (so `kill -9 -1` and
   `os.kill(os.getppid(), 9)` reach nothing outside), only a loopback device of its own (no network), and a
   read-only root holding /usr (the interpreter and the standard library), the /bin, /lib* links, /dev/null, /dev/zero
   and /dev/urandom, the program at /sandbox/main.py, and a writable size-capped tmpfs at /tmp (its cwd and HOME).
   Nothing of /etc, /home, /root, /proc, /work, the repository or the caller's temporary folder is there;
2) no privileges: run by root, the sandbox first drops to uid 65534 (`nobody`), so that the kernel enforces the
   process limit (it never does for uid 0) and the program cannot read root-only files; inside it holds no
   capabilities and cannot create further user namespaces;
3) resource limits set in the sandboxed process itself (setrlimit, soft = hard, so it cannot raise them): CPU
   seconds, address space, processes (threads count), size of any file it writes (its captured stdout/stderr
   included), open files, no core dumps; the process limit counts per sandbox (a fresh user namespace each time);
4) a wall-clock limit: past it the whole process group is killed with SIGKILL, and with it the pid namespace (its
   init dying takes every process in it down); a sandbox also dies with the thread that started it;
5) Python as `-I -S -B -X utf8` (isolated: no environment variables, no user or site directories, no bytecode
   writes) with a cleared environment, in a fresh scratch folder that is removed afterwards.

`sandbox(tool)` builds one and probes it once (cached): the probe checks from inside that the pid and network
namespaces, the filesystem isolation and the process limit really hold. Where no tool works (bubblewrap missing and
unprivileged namespaces blocked, say) it raises ConfigError: code is never run outside a sandbox.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from reinforce_ada.errors import ConfigError

TOOLS = ("bwrap", "unshare")
"""Sandbox tools in the order `auto` tries them."""
NOBODY = 65534
"""The uid/gid a sandbox started by root runs as."""
_STATUS_HEAD = 4000
"""Characters of a failed probe's output quoted in the ConfigError."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run (defaults suit a HumanEval/MBPP check: HumanEval's own limit is 3 s)."""

    wall_s: float = 6.0
    """Wall-clock seconds the program may run (from the interpreter's start) before the whole sandbox is killed."""
    start_s: float = 30.0
    """Seconds the sandbox may take to start the interpreter, apart from `wall_s` (a busy machine must not fail a
    program); past it the run ends with `started = False`."""
    cpu_s: int = 3
    """CPU seconds per process (SIGXCPU at the limit, SIGKILL one second later)."""
    memory_mb: int = 512
    """Address space per process, in MiB (a process cap of `processes` bounds the total)."""
    processes: int = 8
    """Processes and threads of the sandbox's user, the tool's own init included (the code verifier runs two
    interpreters in one sandbox: the judge and the solution, `tasks.code_harness`)."""
    file_mb: float = 1.0
    """Largest file the program may write, its captured stdout+stderr included (past it: EFBIG)."""
    tmp_mb: int = 16
    """Size of the writable /tmp (a tmpfs in memory; past it: ENOSPC)."""
    open_files: int = 64
    output_chars: int = 64_000
    """Characters of the (combined) output kept in `RunResult.output`: the last ones."""

    def __post_init__(self) -> None:
        for name in ("wall_s", "start_s", "file_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
                raise ConfigError(f"sandbox limit {name}={value!r} is not valid; it must be a finite number > 0")
        for name in ("cpu_s", "memory_mb", "processes", "tmp_mb", "open_files", "output_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"sandbox limit {name}={value!r} is not valid; it must be a whole number >= 1")
        if self.processes < 3:
            raise ConfigError(f"sandbox limit processes={self.processes} is not valid; it must be >= 3")


@dataclass(frozen=True)
class RunResult:
    returncode: int
    """The program's exit status (128 + N: killed by signal N inside; -9: killed at the wall-clock limit)."""
    output: str
    """The last `Limits.output_chars` characters of stdout and stderr together."""
    started: bool
    """The interpreter started, set the limits and compiled the program (False: the sandbox or the interpreter failed
    to start, or took longer than `start_s`)."""
    timed_out: bool
    wall_s: float


# Runs first inside the sandbox: set the limits (soft = hard: the program cannot raise them), compile main.py, report
# the start on the `ready` pipe, then run it.
_BOOT = """\
import os, resource, sys
cpu, mem, nproc, fsize, nofile, ready = map(int, sys.argv[1:7])
for name, soft, hard in (("CPU", cpu, cpu + 1), ("AS", mem, mem), ("NPROC", nproc, nproc), ("FSIZE", fsize, fsize),
                         ("NOFILE", nofile, nofile), ("CORE", 0, 0)):
    resource.setrlimit(getattr(resource, "RLIMIT_" + name), (soft, hard))
sys.argv = ["/sandbox/main.py"]
with open("/sandbox/main.py") as _f:
    _code = compile(_f.read(), "/sandbox/main.py", "exec")
os.write(ready, b"1")  # tell the caller the program is ready to run: its wall clock runs from here
os.close(ready)
del cpu, mem, nproc, fsize, nofile, ready, name, soft, hard, _f
exec(_code, {"__name__": "__main__", "__builtins__": __builtins__})
"""

# The unshare path: runs as root of the new user namespace with the caller's mounts, builds the sandbox root on a
# tmpfs, pivots into it (the caller's filesystem is then unmounted from the namespace), forbids nested user namespaces,
# then forks: the child drops every capability (setpriv) and execs the interpreter; this process waits as pid 1 (as
# bwrap's own init does; the child cannot ptrace it, holding fewer capabilities, nor signal it, being its ns's init).
_SETUP = """\
import ctypes, json, os, sys
root, main_py, tmp_bytes, extra, python, setpriv = sys.argv[1:7]
libc = ctypes.CDLL(None, use_errno=True)
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC = 1, 2, 4, 8, 32, 4096, 16384
ATIME = {1024: 1024, 2048: 2048, 4096: 1 << 21}  # statvfs ST_NOATIME/ST_NODIRATIME/ST_RELATIME -> MS_ flags
def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: None if s is None else s.encode()
    if libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount {src} on {dst}: {os.strerror(e)}")
def bind_ro(src, dst):
    mount(src, dst, None, BIND | REC)
    have = os.statvfs(src).f_flag
    locked = sum(v for k, v in ATIME.items() if have & k) | (NOEXEC if have & NOEXEC else 0)
    mount(None, dst, None, BIND | REMOUNT | RDONLY | NOSUID | NODEV | locked)
with open("/proc/sys/user/max_user_namespaces", "w") as f:
    f.write("0")
mount("tmpfs", root, "tmpfs", NOSUID | NODEV, "size=1m,mode=755")
for d in ("usr", "dev", "tmp", "sandbox"):
    os.mkdir(os.path.join(root, d))
for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
    host = "/" + name
    if os.path.islink(host):
        os.symlink(os.readlink(host), os.path.join(root, name))
    elif os.path.isdir(host):
        os.mkdir(os.path.join(root, name))
        bind_ro(host, os.path.join(root, name))
bind_ro("/usr", os.path.join(root, "usr"))
for prefix in json.loads(extra):
    os.makedirs(root + prefix, exist_ok=True)
    bind_ro(prefix, root + prefix)
for dev in ("null", "zero", "urandom"):
    open(os.path.join(root, "dev", dev), "w").close()
    mount("/dev/" + dev, os.path.join(root, "dev", dev), None, BIND)
mount("tmpfs", os.path.join(root, "tmp"), "tmpfs", NOSUID | NODEV, f"size={tmp_bytes},mode=1777")
open(os.path.join(root, "sandbox", "main.py"), "w").close()
bind_ro(main_py, os.path.join(root, "sandbox", "main.py"))
mount(None, root, None, REMOUNT | RDONLY | NOSUID | NODEV)
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}[os.uname().machine]
os.chdir(root)
if libc.syscall(PIVOT_ROOT, b".", b".") != 0 or libc.umount2(b".", 2) != 0:  # 2 = MNT_DETACH
    raise OSError(ctypes.get_errno(), "pivot_root")
os.chdir("/tmp")
caps = ["--bounding-set", "-all", "--inh-caps", "-all", "--ambient-caps", "-all", "--no-new-privs",
        "--securebits", "+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,+keep_caps_locked"]
env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
pid = os.fork()  # this process stays as the namespace's init (pid 1), so the program gets the usual signal rules
if pid == 0:
    os.execve(setpriv, [setpriv, *caps, "--", python, *sys.argv[7:]], env)
os.close(0)
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        pass
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""

# Checks from inside that the promises hold; stdin carries a path that exists outside the sandbox.
_PROBE = """\
import os, resource, socket, sys
outside = sys.stdin.read()
assert os.getpid() <= 3, f"pid {os.getpid()}: no pid namespace"
names = [n for _, n in socket.if_nameindex()]
assert names in ([], ["lo"]), f"network interfaces {names}: no network namespace"
assert not os.path.exists(outside), f"{outside} (outside the sandbox) is visible"
for path in ("/etc", "/root", "/home", "/proc", "/work"):
    assert not os.path.exists(path), f"{path} is visible"
resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
try:
    pid = os.fork()
except OSError:
    pass
else:
    if pid == 0:
        os._exit(0)
    raise AssertionError("the process limit is not enforced (is the sandbox running as root?)")
print("sandbox-ok")
"""


@dataclass(frozen=True)
class Sandbox:
    """One sandbox tool and its settings; `run` is thread-safe (each call is its own sandboxed process)."""

    tool: str
    binary: str
    """Absolute path of bwrap or unshare."""
    python: str
    """Interpreter run inside (its installation is bound read-only; it must be readable by uid 65534 under root)."""
    prefixes: tuple[str, ...] = ()
    """Folders outside /usr bound read-only (the interpreter's installation, when it lives elsewhere)."""
    setpriv: str = "/usr/bin/setpriv"
    limits: Limits = field(default_factory=Limits)

    def run(self, source: str, stdin: bytes = b"", limits: Limits | None = None) -> RunResult:
        """Run Python `source` as /sandbox/main.py with `stdin`; the result is returned, never raised."""
        lim = limits or self.limits
        scratch = tempfile.mkdtemp(prefix="reinforce-ada-sandbox-")
        try:
            os.chmod(scratch, 0o711)  # uid 65534 must reach main.py (bwrap binds it), never list the folder
            main_py = os.path.join(scratch, "main.py")
            with open(main_py, "w") as f:
                f.write(source)
            os.chmod(main_py, 0o644)
            with open(os.path.join(scratch, "output"), "w+b") as out:
                return self._run(scratch, main_py, stdin, out, lim)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _argv(self, scratch: str, main_py: str, lim: Limits, ready: int) -> list[str]:
        boot = [self.python, "-I", "-S", "-B", "-X", "utf8", "-c", _BOOT, str(lim.cpu_s), str(lim.memory_mb << 20)]
        boot += [str(lim.processes), str(int(lim.file_mb * (1 << 20))), str(lim.open_files), str(ready)]
        tmp_bytes = str(lim.tmp_mb << 20)
        if self.tool == "bwrap":
            argv = [self.binary, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent"]
            argv += ["--new-session", "--cap-drop", "ALL", "--clearenv", "--ro-bind", "/usr", "/usr"]
            for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
                host = "/" + name
                if os.path.islink(host):
                    argv += ["--symlink", os.readlink(host), host]
                elif os.path.isdir(host):
                    argv += ["--ro-bind", host, host]
            for prefix in self.prefixes:
                argv += ["--ro-bind", prefix, prefix]
            for dev in ("null", "zero", "urandom"):
                argv += ["--dev-bind", "/dev/" + dev, "/dev/" + dev]
            argv += ["--size", tmp_bytes, "--tmpfs", "/tmp", "--ro-bind", main_py, "/sandbox/main.py"]
            argv += ["--remount-ro", "/", "--chdir", "/tmp"]
            argv += ["--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8"]
            return argv + boot
        root = os.path.join(scratch, "root")
        os.mkdir(root, 0o755)
        setup = [self.python, "-I", "-S", "-B", "-c", _SETUP, root, main_py, tmp_bytes]
        setup += [json.dumps(list(self.prefixes)), self.python, self.setpriv, *boot[1:]]
        unshare = [self.binary, "--user", "--map-root-user", "--net", "--pid", "--kill-child", "--mount", "--ipc"]
        unshare += ["--uts", "--propagation", "private"]
        # unshare does not die with its caller by itself: setpriv sets the parent-death signal, then execs it
        return [self.setpriv, "--pdeathsig", "SIGKILL", "--", *unshare, *setup]

    def _run(self, scratch: str, main_py: str, stdin: bytes, out, lim: Limits) -> RunResult:
        drop = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        t0 = time.monotonic()
        started = timed_out = False
        ready_r, ready_w = os.pipe()
        try:
            argv = self._argv(scratch, main_py, lim, ready_w)
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd="/",
                process_group=0,
                pass_fds=(ready_w,),
                **drop,
            )
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)  # the sandbox holds the only writers now: EOF when it dies before starting
        try:
            started = _ready(ready_r, lim.start_s)
            if started:
                try:
                    proc.communicate(stdin, timeout=lim.wall_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
            else:
                timed_out = proc.poll() is None
        finally:
            os.close(ready_r)
            if proc.poll() is None:
                _kill_group(proc.pid)
            proc.wait()
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()
        wall = time.monotonic() - t0
        out.seek(0, os.SEEK_END)
        out.seek(max(0, out.tell() - 4 * lim.output_chars))
        text = out.read().decode("utf-8", errors="replace")[-lim.output_chars :]
        return RunResult(proc.returncode, text, started, timed_out, wall)


def _ready(fd: int, timeout_s: float) -> bool:
    """Whether the interpreter reported its start on the pipe `fd` within `timeout_s` (poll: any fd number works)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if not poller.poll(timeout_s * 1000):
        return False
    return os.read(fd, 1) == b"1"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # deliberate: it ended between the check and the kill
        pass


def default_python() -> str:
    """The interpreter run inside: the system's /usr/bin/python3 where there is one, else the running one."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else os.path.realpath(sys.executable)


def _prefixes(python: str) -> tuple[str, ...]:
    """The interpreter's installation folders, when they are not under /usr (bound read-only into the sandbox)."""
    code = "import sys; print(sys.base_prefix); print(sys.base_exec_prefix)"
    try:
        found = subprocess.run([python, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"the sandbox interpreter {python} does not run: {e}") from None
    if found.returncode != 0:
        raise ConfigError(f"the sandbox interpreter {python} does not run: {found.stderr.strip()[-500:]}")
    dirs = {os.path.realpath(p) for p in found.stdout.split()}
    return tuple(sorted(d for d in dirs if d != "/usr" and not d.startswith("/usr/")))


_CACHE: dict[tuple, Sandbox] = {}
_CACHE_LOCK = threading.Lock()


def sandbox(tool: str = "auto", *, python: str | None = None, binaries: dict[str, str] | None = None) -> Sandbox:
    """A working sandbox: `bwrap`, `unshare`, or `auto` (the first of them that passes the probe).

    Probed once per (tool, python, binaries) and cached. `binaries` overrides where a tool is looked up (tests use a
    missing path to check the refusal). Raises ConfigError naming each tool's failure when none works.
    """
    if tool not in ("auto", *TOOLS):
        raise ConfigError(f"sandbox={tool!r} is not valid; choose one of ['auto', 'bwrap', 'unshare']")
    key = (tool, python, tuple(sorted((binaries or {}).items())))
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        failures = []
        for name in TOOLS if tool == "auto" else (tool,):
            try:
                box = _probe(name, python or default_python(), (binaries or {}).get(name, name))
            except ConfigError as e:
                failures.append(str(e))
                continue
            _CACHE[key] = box
            return box
    raise ConfigError(
        "no sandbox is available to run model-written code, so the code verifier refuses to run it: "
        + " | ".join(failures)
    )


def _probe(tool: str, python: str, binary: str) -> Sandbox:
    found = shutil.which(binary)
    if found is None:
        hint = "apt-get install bubblewrap" if tool == "bwrap" else "apt-get install util-linux"
        raise ConfigError(f"sandbox tool {tool!r} not found at {binary!r} ({hint})")
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    if tool == "unshare" and not os.access(setpriv, os.X_OK):
        raise ConfigError("sandbox tool 'unshare' needs setpriv (util-linux) to drop privileges; it is missing")
    box = Sandbox(tool, found, python, _prefixes(python), setpriv)
    probe_limits = Limits(wall_s=30.0, cpu_s=10)  # a cold start on a busy machine is slow; never a reason to refuse
    with tempfile.TemporaryDirectory(prefix="reinforce-ada-probe-") as outside:
        result = box.run(_PROBE, outside.encode(), probe_limits)
    if result.returncode != 0 or "sandbox-ok" not in result.output:
        detail = result.output.strip()[-_STATUS_HEAD:] or f"exit status {result.returncode}"
        raise ConfigError(f"sandbox tool {tool!r} ({found}) failed its isolation probe: {detail}")
    return box
