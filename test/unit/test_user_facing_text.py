"""What a new user reads (issue 47): the demos' results tables fit a terminal (at most 120 characters; they were
~300), every reference to "the paper" in printed or documented text names it (output said "paper 000" and
"paper: 10 x (move + 1 s)"), and a no-payload answer says the CoM does not apply (it printed std [nan, nan, nan])."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np

from payload_estimation.payload.estimate import PayloadEstimate
from payload_estimation.payload.estimator import format_estimate
from payload_estimation.reporting import TABLE_WIDTH, format_table, results_table

PACKAGE = Path(__file__).resolve().parents[2] / "payload_estimation"

# the rows of a demo run (lwr4, --fast), as its table printed them: 300 characters wide
DEMO_ROWS = [
    ("payload mass [kg] static / dynamic", "3", "3.0009 / 3.0001", "+0.03 % / +0.00 % (σ 0.0113 / 0.0022 kg)"),
    ("payload inertia diag [kg m²] dynamic", "[0.012, 0.012, 0.006]", "[0.009, 0.0112, 0.0052]",
     "trace -15.4 %; the static poses never determine it"),
    ("contact link, force (the monitor node's answer)", "link_4 50 N, link_6 40 N, link_7 30 N",
     "link_4 (p 0.91, ambiguous: also link_3 0.09): force ambiguous, 49..154 N; link_7 (p 1.00): force 43.9 N "
     "(42..46 N); link_7 (p 0.45, ambiguous: also link_4 0.09, link_5 0.36, link_6 0.10): force ambiguous, "
     "27..297 N", "link (probability), force (95 % range)"),
    ("false alarms (with estimate)", 0, 0, "0.00 s above threshold; node raised 3 stops"),
]


def test_the_demo_tables_fit_120_characters_and_keep_every_word():
    wide = format_table(("quantity", "true", "measured / estimated", "note"), DEMO_ROWS)
    assert max(len(line) for line in wide.splitlines()) > 250  # as printed before
    table = results_table(DEMO_ROWS)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= TABLE_WIDTH == 120, table
    assert all(line.startswith("| ") and line.endswith(" |") and line.count(" | ") == 3 for line in lines if
               not line.startswith("|-")), table
    words = lambda text: re.findall(r"\S+", text)  # noqa: E731
    cells = " ".join(c.strip() for line in lines if not line.startswith("|-") for c in line[1:-1].split(" | "))
    expected = " ".join(" ".join(str(c) for c in row) for row in DEMO_ROWS)
    assert sorted(words(cells)) == sorted(words(expected) + words("quantity true measured / estimated note"))


def test_the_demos_print_their_results_with_the_narrow_table():
    for name in ("demo.py", "demo_online.py"):
        text = (PACKAGE / "cli" / name).read_text()
        assert "results_table(rows)" in text and "format_table(" not in text, name


def _strings_not_docstrings(path: Path):
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for b in body:  # module, class and function docstrings, and attribute docstrings after an assignment
                if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                    docs.add(id(b.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_output_and_parameter_descriptions_name_the_paper():
    unnamed = [f"{p.relative_to(PACKAGE)}:{line}: {text[:80]!r}" for p in sorted(PACKAGE.rglob("*.py"))
               for line, text in _strings_not_docstrings(p) if re.search(r"\bpaper\b", text)]
    assert unnamed == []


def test_a_no_payload_answer_says_the_com_does_not_apply():
    est = PayloadEstimate(0.0, np.zeros(3), None, "tool0", std={"mass": 0.003, "m": 0.003}, condition_number=4.2,
                          residual_rms=0.03, samples=10,
                          method="gravity differential (no payload)", undetermined=("cx", "cy", "cz"),
                          notes=("no payload detected: mass +0.0010 ± 0.0030 kg (1 σ) is within 0.05 kg of 0 at 3 σ",))
    text = format_estimate(est)
    assert "no payload: CoM does not apply" in text and "nan" not in text, text
    held = format_estimate(PayloadEstimate(3.0, np.array([0.0, 0.0, 0.1]), None, "tool0",
                                           std={"mass": 0.01, "cx": 0.001, "cy": 0.001, "cz": 0.002}))
    assert "CoM [0.0, 0.0, 100.0] mm (std [1.0, 1.0, 2.0])" in held
