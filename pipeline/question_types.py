"""Every question type the benchmarks ask, in one table: how its answer is read, scored and exported.

Scoring (``pipeline.scoring.metrics``, ``pipeline.scoring.parsing``) and the exports
(``pipeline.exports.lmms_eval_task``, ``pipeline.exports.pinpointqa``) read this table
instead of keeping their own lists, so adding a question type is one row here, its
profile YAML entry and, for a new generator family, its generator (docs/DESIGN.md,
"How to add a question type"). Numeric or multiple choice is declared here only.

A leaf module: it imports nothing of the pipeline, so every stage may read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AnswerKind:
    """How one kind of answer is parsed from a reply and scored against the ground truth."""

    parser: str  # pipeline.scoring.parsing: "number", "choice", "yes_no", "ssp" (JSON), "free_text"
    metric: str  # pipeline.scoring.metrics / evaluate: "mra", "exact_match", "ssp", "fsd_judge"
    has_options: bool  # the question carries lettered options and its ground truth is a letter


KINDS: dict[str, AnswerKind] = {
    "nq": AnswerKind(parser="number", metric="mra", has_options=False),
    "mcq": AnswerKind(parser="choice", metric="exact_match", has_options=True),
    "yesno": AnswerKind(parser="yes_no", metric="exact_match", has_options=False),
    "ssp": AnswerKind(parser="ssp", metric="ssp", has_options=False),
    "fsd": AnswerKind(parser="free_text", metric="fsd_judge", has_options=False),
}


@dataclass(frozen=True)
class QuestionType:
    """One question type: its answer kind, the benchmarks that name it and the task it is reported under."""

    name: str
    kind: str  # a key of KINDS
    benchmarks: tuple[str, ...]  # of "revsi", "vsibench", "pinpointqa": whose task lists (lmms-eval's too) name it
    task: str = ""  # the reported task (a composite averages its types); empty: the type is its own task
    unit: float | None = None  # metres per answer unit of a length (the robust parser rescales "120 cm"); None: none

    @property
    def reported_task(self) -> str:
        return self.task or self.name


# ReVSI's types in the order of its task columns (ReVSI Table 8), then VSI-Bench's, then PinpointQA's.
QUESTION_TYPES: tuple[QuestionType, ...] = (
    QuestionType("object_abs_distance", "nq", ("revsi", "vsibench"), unit=1.0),
    QuestionType("object_counting_single", "nq", ("revsi",), task="object_counting"),
    QuestionType("object_counting_multiple", "nq", ("revsi",), task="object_counting"),
    QuestionType("object_rel_direction_forward_easy", "mcq", ("revsi",), task="object_rel_direction"),
    QuestionType("object_rel_direction_backward_easy", "mcq", ("revsi",), task="object_rel_direction"),
    QuestionType("object_rel_direction_forward_hard", "mcq", ("revsi",), task="object_rel_direction"),
    QuestionType("object_rel_direction_backward_hard", "mcq", ("revsi",), task="object_rel_direction"),
    QuestionType("object_rel_distance_closest", "mcq", ("revsi",), task="object_rel_distance"),
    QuestionType("object_rel_distance_farthest", "mcq", ("revsi",), task="object_rel_distance"),
    QuestionType("object_size_estimation", "nq", ("revsi", "vsibench"), unit=0.01),
    QuestionType("room_size_estimation_single", "nq", ("revsi",), task="room_size_estimation"),
    QuestionType("room_size_estimation_multiple", "nq", ("revsi",), task="room_size_estimation"),
    QuestionType("route_planning", "mcq", ("revsi", "vsibench")),
    QuestionType("obj_appearance_order", "mcq", ("revsi", "vsibench")),
    QuestionType("object_counting", "nq", ("vsibench",)),
    QuestionType("room_size_estimation", "nq", ("vsibench",)),
    QuestionType("object_rel_distance", "mcq", ("vsibench",)),
    # VSI-Bench's names, averaged the same way by lmms-eval's vsibench task
    QuestionType("object_rel_direction_easy", "mcq", ("vsibench",), task="object_rel_direction"),
    QuestionType("object_rel_direction_medium", "mcq", ("vsibench",), task="object_rel_direction"),
    QuestionType("object_rel_direction_hard", "mcq", ("vsibench",), task="object_rel_direction"),
    QuestionType("presence", "yesno", ("pinpointqa",)),  # TPV
    QuestionType("reference_mcq", "mcq", ("pinpointqa",)),  # NRI
    QuestionType("free_form_localization", "fsd", ("pinpointqa",)),  # FSD
    QuestionType("structured_localization", "ssp", ("pinpointqa",)),  # SSP
)
BY_NAME: dict[str, QuestionType] = {qt.name: qt for qt in QUESTION_TYPES}


def names(benchmark: str, kind: str | None = None) -> tuple[str, ...]:
    """The question types ``benchmark`` names (of answer ``kind`` only, when given), in table order."""
    return tuple(
        qt.name for qt in QUESTION_TYPES if benchmark in qt.benchmarks and (kind is None or qt.kind == kind)
    )


def composites() -> dict[str, tuple[str, ...]]:
    """Task -> the question types whose scores it averages, for every task that averages more than its own name."""
    out: dict[str, tuple[str, ...]] = {}
    for qt in QUESTION_TYPES:
        if qt.task:
            out[qt.task] = (*out.get(qt.task, ()), qt.name)
    return out


def reported_tasks(benchmark: str) -> tuple[str, ...]:
    """The tasks ``benchmark``'s types are reported under, in table order (ReVSI's: its Table 8 columns)."""
    return tuple(dict.fromkeys(qt.reported_task for qt in QUESTION_TYPES if benchmark in qt.benchmarks))
