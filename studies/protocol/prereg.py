"""Pre-registration of headline figures: what a result may call a claim, named before the run.

A pre-registration is a TOML file (e.g. studies/compute_to_target/registrations/preregistration.toml) committed
before the run whose results quote it. It names the instrument (pools, seeds, horizon, targets, the uniform family
and the oracle arms) and, per headline figure, the arm it is read for:

    version = 1
    code = "<commit of the code that runs>"      # optional: the benchmark script runs exactly that code
    [instrument]
    pools = ["hard", "small"]
    seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8]
    steps = 200
    targets = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    uniform = ["grpo-n2", "grpo-n4", "grpo-n8", "grpo-n16"]
    oracles = ["oracle-select", "oracle-alloc", "oracle-both"]
    [[claim]]
    figure = "C1"
    arm = "mopps"
    goal = ">= 2.0"

`provenance(path)` records the file's sha256, the last commit that touched it and whether the file equals that
commit's copy (an uncommitted edit is not a pre-registration). `first_quoted(path, result)` is the registration as
it stood when the result that quotes it was first committed (`first_committed`): a claim must be the same then and
now, or a claim edited and committed after the results would still read as registered before them. `check(prereg,
prov, ..., quoted=)` marks each headline figure of a run as pre-registered or not, with every mismatch spelled out: a
figure whose arm, pool, seeds, horizon or targets differ from the file, whose file was not committed, or whose claim
or instrument differs from the registration as first quoted, is reported as not pre-registered (it stays in the
results, labelled). Edits elsewhere in the file (a comment, an amendment table that names itself) do not unmark a
claim.
"""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError

FIGURES = ("C0", "C1", "C2", "C2g", "C3")
_INSTRUMENT = {
    "pools": list,
    "seeds": list,
    "steps": int,
    "targets": list,
    "uniform": list,
    "oracles": list,
}
_CLAIM = {"figure": str, "arm": str}


def read_file(p: Path) -> dict[str, Any]:
    """A version-1 pre-registration TOML as a dict (any study's: this module's and `studies.llm_convergence.study`'s);
    the error names the file and what is wrong with it."""
    if not p.exists():
        raise ConfigError(f"pre-registration {p} does not exist")
    if not p.is_file():  # a folder, a FIFO (reading one blocks until a writer comes), a device
        raise ConfigError(f"pre-registration {p} is not a regular file; give the registration's .toml file")
    if p.stat().st_size > 1 << 20:
        raise ConfigError(f"pre-registration {p} is {p.stat().st_size} bytes; a registration is a small TOML file")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"pre-registration {p}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"pre-registration {p} is not valid TOML: {e}") from None
    if data.get("version") != 1:
        raise ConfigError(f"pre-registration {p}: version = {data.get('version')!r}; this code reads version = 1")
    return data


def load(path: str | Path) -> dict[str, Any]:
    """Read and check a pre-registration file; errors name the key and what would be valid."""
    p = Path(path)
    data = read_file(p)
    inst = data.get("instrument")
    if not isinstance(inst, dict):
        raise ConfigError(f"pre-registration {p}: needs an [instrument] table with {sorted(_INSTRUMENT)}")
    for key, kind in _INSTRUMENT.items():
        if not isinstance(inst.get(key), kind) or (kind is list and not inst[key]):
            raise ConfigError(f"pre-registration {p}: [instrument] {key} must be a non-empty {kind.__name__}")
    if not all(isinstance(s, int) for s in inst["seeds"]) or len(set(inst["seeds"])) != len(inst["seeds"]):
        raise ConfigError(f"pre-registration {p}: [instrument] seeds must be distinct integers, got {inst['seeds']}")
    if not all(isinstance(t, int | float) and 0 < t < 1 for t in inst["targets"]):
        raise ConfigError(f"pre-registration {p}: [instrument] targets must be fractions in (0, 1)")
    claims = data.get("claim", [])
    if not isinstance(claims, list) or not claims:
        raise ConfigError(f"pre-registration {p}: needs at least one [[claim]] with figure and arm")
    for i, c in enumerate(claims):
        for key, kind in _CLAIM.items():
            if not isinstance(c.get(key), kind):
                raise ConfigError(f"pre-registration {p}: claim {i + 1} needs {key} (a {kind.__name__})")
        if c["figure"] not in FIGURES:
            raise ConfigError(f"pre-registration {p}: claim {i + 1} figure {c['figure']!r}; use one of {FIGURES}")
        if "pools" in c and not set(c["pools"]) <= set(inst["pools"]):
            raise ConfigError(f"pre-registration {p}: claim {i + 1} names pools outside [instrument] pools")
    if "carry" in data:
        _check_carry(p, data["carry"], inst)
    return data


def _check_carry(p: Path, carry: Any, inst: dict[str, Any]) -> None:
    """`[carry]`: `from` (a commit), `arms` (of the registered ones), `check_seeds` (of the registered seeds): which
    arms' records another commit's run may stand in for, after a same-seed check (`protocol.carry`)."""
    if not isinstance(carry, dict):
        raise ConfigError(f"pre-registration {p}: carry must be a table with from, arms and check_seeds")
    unknown = sorted(set(carry) - {"from", "arms", "check_seeds", "why"})
    if unknown:
        raise ConfigError(f"pre-registration {p}: [carry] has unknown keys {unknown}; use from, arms, check_seeds, why")
    frm = carry.get("from")
    if not isinstance(frm, str) or len(frm) < 7 or any(ch not in "0123456789abcdef" for ch in frm):
        raise ConfigError(f"pre-registration {p}: [carry] from = {frm!r} must be a commit's hex sha")
    arms, seeds = carry.get("arms"), carry.get("check_seeds")
    registered = inst.get("arms") or []
    if not isinstance(arms, list) or not arms or (registered and not set(arms) <= set(registered)):
        raise ConfigError(
            f"pre-registration {p}: [carry] arms = {arms!r} must be a non-empty list of registered arms {registered}"
        )
    if not isinstance(seeds, list) or not seeds or not set(seeds) <= set(inst["seeds"]):
        raise ConfigError(
            f"pre-registration {p}: [carry] check_seeds = {seeds!r} must be a non-empty list of registered seeds "
            f"{inst['seeds']} (they are run again and compared with the carried commit's records)"
        )


def provenance(path: str | Path) -> dict[str, Any]:
    """sha256 of the file, the last commit that touched it, and whether the file is that commit's copy."""
    p = Path(path).resolve()
    raw = p.read_bytes()
    out: dict[str, Any] = {"path": str(p), "sha256": hashlib.sha256(raw).hexdigest(), "commit": None}
    out["committed"] = False

    def git(*args: str, cwd: Path = p.parent) -> str | None:
        out = _git(cwd, *args)
        return out.decode().strip() if out is not None else None

    top = git("rev-parse", "--show-toplevel")
    if top is None:
        return out
    rel = p.relative_to(Path(top).resolve()).as_posix()
    out["commit"] = git("log", "-1", "--format=%H", "--", rel, cwd=Path(top)) or None  # rel: from the top
    if out["commit"]:
        blob = subprocess.run(["git", "show", f"{out['commit']}:{rel}"], cwd=top, capture_output=True, timeout=10)
        out["committed"] = blob.returncode == 0 and blob.stdout == raw
    return out


def _git(cwd: Path, *args: str) -> bytes | None:
    """A git command's stdout (None when git or the repository is missing, or the command fails)."""
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def first_committed(result: str | Path) -> str | None:
    """The oldest commit that added the result file (None: never committed): at its path followed through renames,
    or under its file name in any `results/` folder (a study that moved kept its results' names while their contents
    changed too much for git to see a rename)."""
    p = Path(result).resolve()
    top = _git(p.parent if p.parent.exists() else Path.cwd(), "rev-parse", "--show-toplevel")
    if top is None:
        return None
    root = Path(top.decode().strip())

    def added(*spec: str) -> list[str]:
        return (_git(root, "log", "--diff-filter=A", "--format=%H", *spec) or b"").decode().split()

    found = added("--follow", "--", p.relative_to(root).as_posix()) if p.is_relative_to(root) else []
    found += added("--", f":(glob)**/results/{p.name}")
    found = list(dict.fromkeys(found))
    for c in found:  # the one every other descends from (commit times tie within a second)
        if all(o == c or _git(root, "merge-base", "--is-ancestor", c, o) is not None for o in found):
            return c
    return found[-1] if found else None


def first_quoted(registration: str | Path, result: str | Path) -> dict[str, Any] | None:
    """The registration as it stood when `result` was first committed: {commit, path, sha256, content} (content and
    sha256 None when no file of the registration's name was in that commit); None when the result was never
    committed (it is being written now, against the registration as it stands). The registration is found by its
    file name in that commit's tree (registrations keep their names when a study moves)."""
    commit = first_committed(result)
    if commit is None:
        return None
    reg = Path(registration).resolve()
    top = _git(reg.parent, "rev-parse", "--show-toplevel") or _git(
        Path(result).resolve().parent, "rev-parse", "--show-toplevel"
    )
    root = Path(top.decode().strip()) if top else Path.cwd()
    tree = (_git(root, "ls-tree", "-r", "--name-only", commit) or b"").decode().split("\n")
    named = sorted(t for t in tree if t.rsplit("/", 1)[-1] == reg.name)
    if len(named) > 1 and reg.is_relative_to(root) and reg.relative_to(root).as_posix() in named:
        named = [reg.relative_to(root).as_posix()]
    out: dict[str, Any] = {"commit": commit, "path": named[0] if len(named) == 1 else None, "sha256": None}
    out["content"] = None
    if len(named) == 1:
        raw = _git(root, "show", f"{commit}:{named[0]}") or b""
        out["sha256"] = hashlib.sha256(raw).hexdigest()
        try:
            out["content"] = tomllib.loads(raw.decode())
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):  # unreadable then: compared as "not the same"
            out["content"] = {}
    elif len(named) > 1:
        out["path"] = named
    return out


def _as_first_quoted(prereg: dict[str, Any], quoted: dict[str, Any], figure: str) -> list[str]:
    """Why `figure`'s claim (or the instrument) now differs from the registration as first quoted; [] if it does
    not."""
    when = f"when the results quoting it were first committed ({quoted['commit'][:7]})"
    then = quoted.get("content")
    if then is None:
        where = f"several files named so: {quoted['path']}" if isinstance(quoted.get("path"), list) else "none"
        return [f"the registration was not in the repository {when} ({where})"]
    why = []
    inst_then, inst_now = then.get("instrument") or {}, prereg["instrument"]
    changed = sorted(k for k in set(inst_then) | set(inst_now) if inst_then.get(k) != inst_now.get(k))
    if changed:
        why.append(f"[instrument] {changed} edited after the registration stood as it did {when}")
    now_claims = claims_for(prereg, figure)
    then_claims = [c for c in then.get("claim", []) if c.get("figure") == figure]
    if now_claims != then_claims:
        why.append(f"{figure}'s claim was {then_claims or 'absent'} {when}, now {now_claims or 'absent'}")
    return why


def claims_for(prereg: dict[str, Any], figure: str) -> list[dict[str, Any]]:
    return [c for c in prereg["claim"] if c["figure"] == figure]


def check(
    prereg: dict[str, Any] | None,
    prov: dict[str, Any] | None,
    figure: str,
    arm: str,
    pool: str,
    run: dict[str, Any],
    quoted: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Is `figure` for `arm` on `pool` pre-registered? `run`: the run's seeds, steps and targets; `quoted`: the
    registration as it stood when the results quoting it were first committed (`first_quoted`; None when they never
    were)."""
    if prereg is None:
        return {"preregistered": False, "why": ["no pre-registration file was given"]}
    why = []
    if not (prov or {}).get("committed"):
        why.append("the pre-registration file differs from its last commit (or is not committed)")
    if quoted is not None:
        why += _as_first_quoted(prereg, quoted, figure)
    cl = [c for c in claims_for(prereg, figure) if c["arm"] == arm]
    if not cl:
        named = [c["arm"] for c in claims_for(prereg, figure)]
        why.append(f"{figure} is registered for {named or 'no arm'}, not {arm!r}")
    inst = prereg["instrument"]
    pools = cl[0].get("pools", inst["pools"]) if cl else inst["pools"]
    if pool not in pools:
        why.append(f"pool {pool!r} is not among the registered {pools}")
    if sorted(run["seeds"]) != sorted(inst["seeds"]):
        why.append(f"seeds {sorted(run['seeds'])} differ from the registered {sorted(inst['seeds'])}")
    if run["steps"] != inst["steps"]:
        why.append(f"horizon {run['steps']} steps differs from the registered {inst['steps']}")
    if [round(t, 6) for t in run["targets"]] != [round(t, 6) for t in inst["targets"]]:
        why.append(f"targets {run['targets']} differ from the registered {inst['targets']}")
    return {"preregistered": not why, "why": why}
