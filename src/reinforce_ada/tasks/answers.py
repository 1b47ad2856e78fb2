"""Reading a final answer out of a completion, and the guards against answers math-verify would misread.

`extract_answer`: the last `\\boxed{}`/`\\fbox{}`, else the text after the last `####`, else "the answer is ...", else
the last number. Verifiers judge only this answer, never the whole completion (an echoed question would score).
`numeric` (the last number) and `numeric_marked` (the marked answer, no last-number fallback) compare a number with
the reference's: the two number verifiers of `tasks.verifiers`.

math-verify's LaTeX reader stops at what it cannot read and keeps the prefix: `10**2`, `10**99`, `10<<2`, `10|2`,
`10&2` and `10)(` all parse as 10, so a model could write any of them and score against gold 10. `malformed()` rejects
an extracted answer with a programming operator (`**`, `//`, `<<`, `>>`, a bare `&`), an unpaired `|`, or brackets
that close before they open or never close (intervals such as `[0, 1)` are fine); such an answer scores 0 without
being parsed. Gold answers are not checked (they come from the dataset).

`hedged()` rejects an answer that lists alternatives where the gold has one (`1 \\lor 2 \\lor 5`, `x = 3 = 4`), which
math-verify would credit through the alternative it happens to read; `ascii_digits()` reads other digit scripts
(`٣`, `３`) as the digits they are.
"""

from __future__ import annotations

import re
import unicodedata

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_ANSWER_IS = re.compile(r"answer is\s*:?\s*", re.IGNORECASE)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
MAX_ANSWER_CHARS = 1000
"""An extracted answer longer than this scores 0 without being parsed (a runaway box is not an answer)."""


def _last_box(text: str) -> str | None:
    """Content of the last `\\boxed{...}`/`\\fbox{...}` whose braces balance; earlier boxes if the last is cut off."""
    starts = [m.end() - 1 for m in _BOX.finditer(text)]  # positions of the opening braces
    if not starts:
        return None
    # one pass over all braces (not one scan per box: a megabyte of unclosed boxes must stay linear)
    close_of: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"[{}]", text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            close_of[stack.pop()] = m.start()
    for start in reversed(starts):
        if start in close_of:
            return text[start + 1 : close_of[start]]
    return None


_PROGRAMMING_OPS = re.compile(r"\*\*|//|<<|>>|(?<!\\)&")


def malformed(ans: str) -> str | None:
    r"""Why `ans` is not a complete math answer (math-verify would read only a prefix of it), else None.

    >>> malformed("10**2"), malformed("10 | 2"), malformed("10)("), malformed("\\frac{1}{2")
    ('operator **', "an unpaired '|'", "')' before its opening bracket", 'unbalanced braces')
    >>> [malformed(a) for a in ("[0, 1)", "|-3|", "\\{1, 2\\}", "10\\%", "2^{10}", "\\left( 1, 2 \\right]")]
    [None, None, None, None, None, None]
    """
    op = _PROGRAMMING_OPS.search(ans)
    if op:
        return f"operator {op.group()}"
    plain = re.sub(r"\\[{}|]|\\[a-zA-Z]+", " ", ans)  # escaped braces/bars and commands (\left, \mid) aside
    if plain.count("|") % 2:
        return "an unpaired '|'"
    depth = braces = 0
    for ch in plain:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                return f"'{ch}' before its opening bracket"
        elif ch == "{":
            braces += 1
        elif ch == "}":
            braces -= 1
            if braces < 0:
                return "unbalanced braces"
    if braces:
        return "unbalanced braces"
    if depth:
        return "an unclosed bracket"
    return None


_EQUALS = re.compile(r"(?<![<>!=])=(?!=)")
_HEDGES = re.compile(r"\\(?:lor|vee|land|wedge|mid|cup|cap|bigvee|bigwedge|lnot|neg|oplus)(?![a-zA-Z])")


def hedged(pred: str, gold: str) -> str | None:
    """Why `pred` hedges where `gold` does not (math-verify would credit one of its alternatives), else None.

    math-verify reads `1 \\lor 2 \\lor 5` (and `\\vee`, `\\wedge`, `\\land`, `\\mid`, `\\cup`) as its last part, 5,
    and an equation as its right side, so `x = 3 = 4` and `3 = 4` both score against gold 4. So a connective the gold
    does not use is refused, and so are, in any comma-separated part of the answer, a chain of equals signs (when the
    gold has none) and an equation whose left side has no variable (`3 = 4`, also the true `2 + 2 = 4`: state the
    value). A gold that is itself a disjunction or a union (`x=1 \\vee x=2`, an interval union) lets the prediction
    use the same connective, and math-verify decides; `a = 2, b = 3` is two equations, not a chain.

    >>> hedged(r"1 \\lor 2 \\lor 5", "5"), hedged("x = 3 = 4", "4"), hedged("3 = 4", "4")
    ('the connective \\\\lor', 'a chain of 2 equals signs', 'an equation between numbers')
    >>> [hedged(p, g) for p, g in [("x = 4", "4"), (r"(0, 1) \\cup (2, 3)", r"(0,1) \\cup (2,3)"), ("a=2, b=3", "2")]]
    [None, None, None]
    >>> hedged("x = 3 = 4", "x = 4")
    'a chain of 2 equals signs'
    """
    for hedge in _HEDGES.finditer(pred):
        if hedge.group() not in gold:
            return f"the connective {hedge.group()}"
    allowed = max(1, *(len(_EQUALS.findall(part)) for part in gold.split(",")))
    for part in pred.split(","):
        equals = len(_EQUALS.findall(part))
        if equals > allowed:
            return f"a chain of {equals} equals signs"
        left = re.sub(r"\\[a-zA-Z]+", "", _EQUALS.split(part)[0])
        if equals and not _EQUALS.search(gold) and not re.search(r"[A-Za-z]", left):
            return "an equation between numbers"
    return None


def ascii_digits(text: str) -> str:
    """`text` with every Unicode decimal digit (Arabic-Indic `٣`, fullwidth `３`, Devanagari, ...) as its ASCII digit
    and fullwidth ASCII forms (`＋`, `．`) as ASCII; nothing else changes (no NFKC: `x²` must not become `x2`).

    >>> ascii_digits("٣٤ + ３．５ = x²")
    '34 + 3.5 = x²'
    """
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
            continue
        digit = unicodedata.decimal(ch, None)
        if digit is not None:
            out.append(str(digit))
        elif 0xFF01 <= ord(ch) <= 0xFF5E:
            out.append(chr(ord(ch) - 0xFEE0))
        else:
            out.append(ch)
    return "".join(out)


def _clean(ans: str) -> str:
    return ans.strip().strip("$").strip().rstrip(".").strip()


def extract_answer(text: str, *, last_number: bool = True) -> str | None:
    """The final answer of a completion: last box, else after the last `####`, else "the answer is", else a number.

    >>> extract_answer(r"so \\boxed{1} then \\boxed{\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    >>> extract_answer(r"\\fbox{ {a} } and \\boxed{unclosed")
    '{a}'
    >>> extract_answer("5 + 5 = 10\\n#### 10")
    '10'
    >>> extract_answer("Hence the answer is $-3$.")
    '-3'
    >>> extract_answer("What is 9-2? I think 9-2 is 13")
    '13'
    >>> extract_answer("no digits here") is None
    True
    >>> extract_answer("it is 4", last_number=False) is None
    True
    """
    boxed = _last_box(text)
    if boxed is not None:
        return _clean(boxed)
    pos = text.rfind("####")
    if pos >= 0:
        after = text[pos + 4 :].strip().splitlines()
        if after and _clean(after[0]):
            return _clean(after[0])
    said = list(_ANSWER_IS.finditer(text))
    if said:
        rest = text[said[-1].end() :].strip().splitlines()
        # up to the end of the sentence: a period followed by a space or the end (not a decimal point)
        found = re.split(r"\.(?:\s|$)", rest[0], maxsplit=1)[0] if rest else ""
        if _clean(found):
            return _clean(found)
    if last_number:
        found = _NUMBER.findall(text)
        if found:
            return found[-1].replace(",", "")
    return None


# -- numbers: the `numeric` verifiers (`tasks.verifiers`) ----------------------------------------------------------
def _to_float(s: str) -> float | None:
    s = s.replace(",", "")
    try:
        if "/" in s:
            num, den = s.split("/", 1)
            return float(num) / float(den)
        return float(s)
    except (ValueError, ZeroDivisionError):
        return None


def numeric(completion: str, answer: str, *, rel_tol: float = 1e-6) -> float:
    """1.0 iff the last number in the completion equals the answer's number within `rel_tol`.

    >>> numeric("so the total is 1,250.", "1250")
    1.0
    >>> numeric("3/4", "0.75")
    1.0
    >>> numeric("no number", "3")
    0.0
    """
    found = _NUMBER.findall(completion)
    want = _to_float(answer.strip())
    got = _to_float(found[-1]) if found else None
    if want is None or got is None:
        return 0.0
    return 1.0 if abs(got - want) <= rel_tol * max(1.0, abs(want)) else 0.0


def numeric_marked(completion: str, answer: str, *, rel_tol: float = 1e-6) -> float:
    """`numeric` on the completion's marked answer (`extract_answer` without its last-number fallback: the last
    `\\boxed{}`, the text after `####`, or what follows "the answer is"); 0.0 without one. For free-form working: the
    last number of "The answer is 56. (Check: 56 / 8 = 7)" is 7, and a bare "56" or a sample cut mid-working has no
    marked answer, so only an answer that says which number is its result scores.

    >>> numeric_marked("7 x 8 = 56. The answer is 56. (Check: 56 / 8 = 7)", "56")
    1.0
    >>> numeric_marked("56", "56")
    0.0
    >>> numeric_marked("7 x 8 = 56, so the answer is 54.", "56")
    0.0
    """
    marked = extract_answer(completion, last_number=False)
    return numeric(marked, answer, rel_tol=rel_tol) if marked and len(marked) <= MAX_ANSWER_CHARS else 0.0
