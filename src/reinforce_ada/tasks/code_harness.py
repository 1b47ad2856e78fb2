"""The code verifier's two-process harness: the tests and their verdict never share a process with the model's code.

Inside one sandbox (`tasks.sandbox`) run two processes:

- the *judge* (`JUDGE`, the sandbox's main program) first makes itself undumpable (`prctl(PR_SET_DUMPABLE, 0)`: no
  other process of the sandbox may ptrace it or read its memory; the sandbox has no /proc), then forks
- the *solution*'s process, before the judge reads anything of the job: its memory holds neither the tests nor the
  per-call secret, and its only channels are two pipes to the judge (its stdin, stdout and stderr are /dev/null; no
  other file descriptor is open). It waits for the program (prefix + the model's code), runs it and then serves
  calls: "call `name` with these arguments" -> the returned value, or the exception's type and message.
  The judge then reads the job on stdin (prefix, tests, entry point, secret) and runs the prefix (the prompt's
  trusted helpers) in the tests' namespace.

The tests run in the judge with pristine modules and built-ins. The entry point, and every other name the tests use
that the prefix does not define and the solution does, is bound in the judge to a proxy that sends the arguments
to the solution and decodes its answer. Values cross the pipes in a tagged JSON encoding of plain data only (None,
bool, int, float, complex, str, bytes, and list/tuple/set/frozenset/dict/deque/OrderedDict of them; exact types),
decoded in the judge by its own decoder, so what comes back is always a plain built-in value: no `__eq__` that says
True, no object that runs code in the judge. A list/dict/set argument the solution changed in place is changed in
place in the judge too (the tests may check it). The judge writes the secret to the sandbox's output (which only it
holds) only after the tests ran to the end.

So the model's code cannot patch what the tests import (`math.fabs = ...`, `unittest.TestCase.assertEqual = ...`,
`builtins.abs = ...`): that changes its own process only; cannot trace or jump over the assertions (`sys.settrace`
acts on its own frames); cannot read the secret (it never enters its process) nor print it; cannot exit "on behalf of"
the tests (its exit makes the pending call fail). Killing or stopping the judge only ends the run without the
secret: score 0. What is still possible, as with any test-based reward: code that special-cases the inputs the tests
send (it sees every argument), and a function that reads its inputs' values to look up answers it was trained on.

What is not supported (scores 0, as the test cannot be run faithfully): tests that pass the solution something that
is not plain data (a function, a generator, an instance of a class) or that need a non-plain value back (an
instance, a generator, a numpy array), and tests that use a class the solution defines. A module the tests use
without importing it (MBPP's `math.isclose` relying on the solution's `import math`) is imported afresh in the judge
when it is a standard-library module. HumanEval's 164 canonical solutions all pass (tests/test_code_task.py).
"""

from __future__ import annotations

HARNESS_FAILED = 3
"""The judge's exit status when it could not set itself up (before any of the model's code ran): the verifier
raises (a counted error, not a silent 0)."""

# The plain-data codec, part of the judge's program (and so of the solution's process, forked from it). The judge
# imports nothing the solution could shadow: /tmp, the only writable folder, is not on sys.path under `-I`.
_CODEC = r'''
import collections as _collections

_TAGS = {tuple: "tuple", set: "set", frozenset: "frozenset", _collections.deque: "deque", bytes: "bytes",
         complex: "complex", dict: "dict", _collections.OrderedDict: "odict", _collections.defaultdict: "dict"}
_MAX_DEPTH = 100


def encode(value, depth=0):
    """`value` as JSON-ready data; TypeError when it is not plain built-in data (exact types)."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if depth > _MAX_DEPTH:
        raise TypeError(f"data nested deeper than {_MAX_DEPTH} levels")
    if kind is list:
        return [encode(x, depth + 1) for x in value]
    tag = _TAGS.get(kind)
    if tag is None:
        raise TypeError(f"a {kind.__name__} is not plain data (only built-in scalars and containers cross)")
    if tag == "bytes":
        return {"$": tag, "v": value.hex()}
    if tag == "complex":
        return {"$": tag, "v": [value.real, value.imag]}
    if tag in ("dict", "odict"):
        return {"$": tag, "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    return {"$": tag, "v": [encode(x, depth + 1) for x in value]}


def decode(data, depth=0):
    """The plain value `data` encodes; ValueError on anything else."""
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if depth > _MAX_DEPTH:
        raise ValueError(f"data nested deeper than {_MAX_DEPTH} levels")
    if kind is list:
        return [decode(x, depth + 1) for x in data]
    if kind is not dict or set(data) != {"$", "v"}:
        raise ValueError(f"not an encoded value: {kind.__name__}")
    tag, v = data["$"], data["v"]
    if tag == "bytes" and type(v) is str:
        return bytes.fromhex(v)
    if tag == "complex" and type(v) is list and len(v) == 2 and all(type(x) in (int, float) for x in v):
        return complex(v[0], v[1])
    if type(v) is not list:
        raise ValueError(f"bad payload for tag {tag!r}")
    if tag in ("dict", "odict"):
        pairs = []
        for pair in v:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("a dict entry is not a [key, value] pair")
            pairs.append((decode(pair[0], depth + 1), decode(pair[1], depth + 1)))
        return dict(pairs) if tag == "dict" else _collections.OrderedDict(pairs)
    kinds = {"tuple": tuple, "set": set, "frozenset": frozenset, "deque": _collections.deque}
    if tag not in kinds:
        raise ValueError(f"unknown tag {tag!r}")
    return kinds[tag](decode(x, depth + 1) for x in v)
'''

JUDGE = (
    r"""
import builtins, importlib, json, os, sys
"""
    + _CODEC
    + r'''
HARNESS_FAILED = @HARNESS_FAILED@


class SolutionGone(BaseException):
    """The solution's process ended or broke the protocol: fatal for the tests (`except Exception` cannot catch it)."""


def _undumpable():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _names(code):
    found = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            found |= _names(const)
    return found


def _serve(rpc_in, rpc_out):
    """The solution's process: run the program, report the names asked for, then answer calls until EOF."""
    job = json.loads(rpc_in.readline())

    def reply(obj):
        rpc_out.write(json.dumps(obj).encode() + b"\n")
        rpc_out.flush()

    space = {"__name__": "solution", "__builtins__": builtins}
    try:
        exec(compile(job["program"], "solution.py", "exec"), space)
    except BaseException as e:
        reply({"error": f"{type(e).__name__}: {e}"[:500]})
        return
    names = {}
    for name in job["names"]:
        if name not in space:
            continue
        value = space[name]
        if type(value).__name__ == "module":
            names[name] = ["module", getattr(value, "__name__", "")]
        elif callable(value) and not isinstance(value, type):
            names[name] = ["function"]
        else:
            try:
                names[name] = ["value", encode(value)]
            except TypeError as e:
                names[name] = ["other", str(e)]
    reply({"names": names})
    while True:
        line = rpc_in.readline()
        if not line:
            return
        request = json.loads(line)
        args = decode(request["args"])
        kwargs = decode(request["kwargs"])
        try:
            result = space[request["name"]](*args, **kwargs)
        except Exception as e:
            reply({"raised": type(e).__name__, "message": str(e)[:500]})
            continue
        except BaseException as e:  # SystemExit, KeyboardInterrupt: in one process no `except Exception` stops them
            reply({"fatal": f"{request['name']} raised {type(e).__name__}"})
            continue
        try:
            reply({"ok": encode(result), "args": [encode(a) for a in args]})
        except Exception as e:
            reply({"fatal": f"{request['name']} returned what cannot cross: {type(e).__name__}: {e}"[:500]})


def _fork_solution():
    """Fork the solution's process now, before the job (tests, secret) is read, so its memory holds none of it. Its
    only channels are two pipes; its stdin, stdout and stderr are /dev/null (the judge's output is not its)."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(to_w)
            os.close(from_r)
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            _serve(os.fdopen(to_r, "rb"), os.fdopen(from_w, "wb"))
        finally:
            os._exit(0)
    os.close(to_r)
    os.close(from_w)
    return os.fdopen(to_w, "wb"), os.fdopen(from_r, "rb")


class _Solution:
    """The model's program in a process of its own; `call` sends a call and decodes the answer."""

    def __init__(self, pipes, program, names):
        self.to_solution, self.from_solution = pipes
        self._send({"program": program, "names": names})
        ready = self._receive()
        if "error" in ready:
            raise RuntimeError(f"the solution failed to load: {ready['error']}")
        self.names = ready.get("names")

    def _send(self, obj):
        try:
            self.to_solution.write(json.dumps(obj).encode() + b"\n")
            self.to_solution.flush()
        except BrokenPipeError:
            raise SolutionGone("the solution's process ended") from None

    def _receive(self):
        line = self.from_solution.readline()
        if not line:
            raise SolutionGone("the solution's process ended")
        try:
            reply = json.loads(line)
        except ValueError as e:
            raise SolutionGone(f"an unreadable reply: {e}") from None
        if type(reply) is not dict:
            raise SolutionGone("a reply that is not an object")
        return reply

    def call(self, name, args, kwargs):
        self._send({"name": name, "args": encode(list(args)), "kwargs": encode(dict(kwargs))})
        reply = self._receive()
        if "fatal" in reply:
            raise SolutionGone(str(reply["fatal"]))
        if "raised" in reply:
            kind = getattr(builtins, str(reply["raised"]), None)
            if not (isinstance(kind, type) and issubclass(kind, Exception)):
                kind = RuntimeError
            raise kind(str(reply.get("message", "")))
        try:
            result = decode(reply["ok"])
            after = [decode(x) for x in reply["args"]]
        except (KeyError, TypeError, ValueError, RecursionError) as e:
            raise SolutionGone(f"a malformed reply: {type(e).__name__}: {e}") from None
        if len(after) == len(args):
            for before, new in zip(args, after):
                _update(before, new)
        return result


def _update(before, after):
    """Carry an in-place change of a list/dict/set argument back to the tests' own object."""
    if type(before) is not type(after) or before == after:
        return
    if type(before) is list:
        before[:] = after
    elif type(before) in (dict, set):
        before.clear()
        before.update(after)


def _proxy(solution, name):
    def proxy(*args, **kwargs):
        return solution.call(name, args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def _unusable(name, why):
    def unusable(*args, **kwargs):
        raise TypeError(f"the solution's {name} cannot be used by the tests: {why}")

    return unusable


def _bind(tests, solution, entry, wanted):
    """Bind the names the judge asked for, and only those: the reply comes from the solution's process, which may
    claim anything (a built-in or a prompt helper the tests use must never become a proxy)."""
    names = solution.names if type(solution.names) is dict else {}
    if entry and entry not in names:
        raise NameError(f"the solution does not define {entry}")
    for name in wanted:
        if name not in names:
            continue
        kind, *rest = names[name] if type(names[name]) is list and names[name] else ["other"]
        if kind == "function":
            tests[name] = _proxy(solution, name)
        elif kind == "value":
            tests[name] = decode(rest[0])
        elif kind == "module" and rest[0] == name and name in sys.stdlib_module_names:
            tests[name] = importlib.import_module(name)
        else:
            tests[name] = _unusable(name, str(rest[0]) if rest else "not plain data")


def _main():
    try:
        _undumpable()
        pipes = _fork_solution()
        job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        nonce = job.pop("nonce")
        tests = {"__name__": "tests", "__builtins__": builtins}
        if job["prefix"]:
            exec(compile(job["prefix"], "prompt.py", "exec"), tests)
        code = compile(job["tests"], "tests.py", "exec")
    except BaseException as e:
        print(f"harness setup failed: {type(e).__name__}: {e}", flush=True)
        os._exit(HARNESS_FAILED)
    entry = job["entry_point"]
    wanted = {n for n in _names(code) if n not in tests and not hasattr(builtins, n)}
    wanted = sorted(wanted | ({entry} if entry else set()))
    solution = _Solution(pipes, job["program"], wanted)
    _bind(tests, solution, entry, wanted)
    exec(code, tests)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, ("\n" + nonce + "\n").encode())


_main()
'''
).replace("@HARNESS_FAILED@", str(HARNESS_FAILED))
