"""Reasoning blocks are removed before a reply is read, as lmms-eval removes them (SPEC §6, issue 37 item 5).

Mirrors ``lmms_eval.api.reasoning.strip_reasoning_tags`` of lmms-eval v0.7.2 (commit 75571cf, August 2026)
with the evaluator's default ``--reasoning_tags`` ``[["<think>", "</think>"], ["<analysis>", "</analysis>"]]``
(``lmms_eval/__main__.py``), which ``evaluator.py`` applies to every response before ``process_results``:
paired blocks cut (first opening tag to the first closing tag after it, repeatedly), a closing tag left
without an opening one keeps only what follows the last of them (a prefilled ``<think>``), tags
case-sensitive, an unclosed opening tag left as it is, the result stripped. The expected outputs below
were worked out from that function; the first two are its own tests (``test/eval/test_reasoning.py``).
"""

from __future__ import annotations

import pytest

from pipeline.scoring.evaluate import score_question
from pipeline.scoring.parsing import parse_reply, strip_reasoning

OPTIONS = ["A. chair", "B. table", "C. sofa", "D. lamp"]


@pytest.mark.parametrize(
    "reply,expected",
    [
        ("<think>\nreasoning\n</think>\n\nYes", "Yes"),
        ("reasoning from completion only\n</think>\n\nNo", "No"),
        ("<think>The table is nearer.</think>B", "B"),
        ("<analysis>two chairs, one stool</analysis>\n3", "3"),
        ("<think>a</think>C<think>b</think>", "C"),
        ("<analysis>x</analysis> <think>y</think> D.", "D."),
        ("<think>a<think>b</think>c</think>B", "B"),  # the inner close ends the block; the stray close is cut after
        ("<THINK>upper case</THINK>B", "<THINK>upper case</THINK>B"),
        ("<think>never closed, so A", "<think>never closed, so A"),
        ("</think> x <think>", "</think> x <think>"),  # the only close comes before the open: left alone
        ("  B  ", "B"),
        ("", ""),
    ],
)
def test_strip_reasoning_is_lmms_eval_strip_reasoning_tags(reply, expected):
    assert strip_reasoning(reply) == expected


@pytest.mark.parametrize("mode", ["harness", "robust"])
def test_a_reasoning_reply_scores_as_lmms_eval_scores_it(mode):
    row = {"id": "q", "question_type": "route_planning", "options": OPTIONS, "ground_truth": "B", "question": "?"}
    assert score_question(row, "<think>A is the chair, so not A.</think>B", mode, None)["score"] == 1.0
    assert score_question(row, "Let me see.\n</think>\nB", mode, None)["score"] == 1.0
    number = {"id": "q", "question_type": "object_counting_single", "options": [], "ground_truth": "3", "question": "?"}
    assert score_question(number, "<analysis>I count 5 legs</analysis>3", mode, None)["score"] == 1.0
    presence = {"id": "q", "question_type": "presence", "options": [], "ground_truth": "No", "question": "?"}
    assert score_question(presence, "<think>Yes? no.</think>No", mode, None)["score"] == 1.0


def test_unclosed_block_is_not_read_in_harness_mode():
    """lmms-eval leaves an unclosed ``<think>`` in place, so its first token is ``<think>``: unreadable, 0."""
    assert not parse_reply("<think>B because", "mcq", "harness", OPTIONS).ok
