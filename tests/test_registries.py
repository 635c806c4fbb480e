"""The extension-point tables agree with what uses them: every question type a profile asks is in the question-type
table, every reader's dataset in the dataset table, and the lists derived from them are the ones the papers fix."""

from pipeline import datasets, question_types, schemas
from pipeline.qa.families import FAMILIES
from pipeline.qa.profiles import PROFILE_DIR, load_profile
from pipeline.scene.readers import READERS
from pipeline.scoring import metrics


def test_every_profile_type_is_in_the_question_type_table_with_a_known_kind():
    for path in sorted(PROFILE_DIR.glob("*.yaml")):
        profile = load_profile(path.stem)
        for question_type, rule in profile.tasks.items():
            assert question_type in question_types.BY_NAME, (path.name, question_type)
            assert profile.name in question_types.BY_NAME[question_type].benchmarks, (path.name, question_type)
            assert rule.family in FAMILIES
    assert {qt.kind for qt in question_types.QUESTION_TYPES} <= set(question_types.KINDS)


def test_the_derived_lists_are_the_harnesses():
    assert metrics.answer_kind("presence") == "yesno" and metrics.answer_kind("structured_localization") == "ssp"
    assert metrics.answer_kind("free_form_localization") == "fsd" and metrics.answer_kind("reference_mcq") == "mcq"
    assert metrics.answer_kind("not_in_the_table", ["A. x"]) == "mcq" and metrics.answer_kind("not_in_the_table") == "nq"
    assert set(metrics.REVSI_NQ_TYPES) == {"object_counting_single", "object_counting_multiple", "object_abs_distance",
                                           "object_size_estimation", "room_size_estimation_single",
                                           "room_size_estimation_multiple"}
    assert set(metrics.VSIBENCH_MCQ_TYPES) == {"object_rel_distance", "object_rel_direction_easy",
                                               "object_rel_direction_medium", "object_rel_direction_hard",
                                               "route_planning", "obj_appearance_order"}
    assert metrics.task_of("object_rel_direction_medium") == "object_rel_direction"
    assert metrics.task_of("route_planning") == "route_planning"


def test_every_reader_names_a_dataset_of_the_table():
    assert schemas.DATASETS == datasets.DATASET_NAMES
    for reader in READERS:
        assert reader.name in datasets.BY_NAME, reader.name


def test_frame_rates_follow_the_run_config():
    from pipeline.config import FramesConfig

    frames = FramesConfig(fps=12.0, fps_3rscan=3.0)
    assert datasets.all_frame_rate("3rscan", frames) == 3.0
    assert datasets.all_frame_rate("scannet", frames) == datasets.all_frame_rate("unknown", frames) == 12.0
