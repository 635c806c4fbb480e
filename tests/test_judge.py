"""The FSD judge client against a local chat-completions server with canned (good and bad) behaviour."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipeline.scoring.evaluate import evaluate
from pipeline.scoring.judge import (
    FsdJudge,
    JudgeCache,
    JudgeError,
    JudgeSettings,
    apply_rubric,
    parse_judgment_text,
)

GOOD = {
    "total": 9,
    "surface": 3,
    "references": 2,
    "relations": 2,
    "distances": 1,
    "clarity": 1,
    "explanation": "close",
    "error_tags": ["wrong_distance", "made_up_tag"],
}


class FakeChatServer:
    """Serves /v1/chat/completions from a queue of scripted behaviours: a dict (judgment), a string (raw content),
    ("status", code) or ("sleep", seconds)."""

    def __init__(self):
        self.script: list = []
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                action = outer.script.pop(0) if outer.script else GOOD
                if isinstance(action, tuple) and action[0] == "status":
                    self.send_response(action[1])
                    if action[1] == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                if isinstance(action, tuple) and action[0] == "sleep":
                    time.sleep(action[1])
                    action = GOOD
                content = action if isinstance(action, str) else json.dumps(action)
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server():
    with FakeChatServer() as srv:
        yield srv


def make_judge(server, tmp_path, **kw) -> FsdJudge:
    settings = JudgeSettings(
        url=server.url, model="judge-model", key="sk-test", backoff=0.001, cache_path=str(tmp_path / "cache.jsonl"), **kw
    )
    return FsdJudge(settings, sleep=lambda s: None)


def test_request_protocol_and_rubric_enforcement(server, tmp_path):
    judge = make_judge(server, tmp_path)
    result = judge.judge("q1", "Where is the phone?", "On the table, 8 cm from the laptop.", "On the table.")
    assert result.total == 9 and result.normalized == 0.9
    assert result.error_tags == ["wrong_distance"]  # unknown tags dropped
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"]["temperature"] == 0 and request["body"]["model"] == "judge-model"
    assert "On the table, 8 cm" in request["body"]["messages"][1]["content"]


def test_rubric_clips_dimensions_recomputes_and_caps_total():
    inflated = {"total": 10, "surface": 5, "references": 2, "relations": 3, "distances": -1, "clarity": 1}
    assert apply_rubric(inflated).total == 3 + 2 + 2 + 0 + 1
    no_anchor = {"total": 5, "surface": 0, "references": 0, "relations": 2, "distances": 2, "clarity": 1}
    assert apply_rubric(no_anchor).total == 2
    wrong_sum = {"total": 1, "surface": 2, "references": 1, "relations": 1, "distances": 1, "clarity": 0}
    assert apply_rubric(wrong_sum).total == 5
    fenced = "```json\n" + json.dumps(GOOD) + "\n```"
    assert parse_judgment_text(fenced).total == 9


def test_cache_hit_sends_no_second_request(server, tmp_path):
    judge = make_judge(server, tmp_path)
    first = judge.judge("q1", "?", "gt", "pred")
    assert len(server.requests) == 1
    again = make_judge(server, tmp_path).judge("q1", "?", "gt", "pred")  # fresh client, same cache file
    assert again == first and len(server.requests) == 1
    make_judge(server, tmp_path).judge("q1", "?", "gt", "another prediction")
    assert len(server.requests) == 2
    assert len(JudgeCache(tmp_path / "cache.jsonl")) == 2


def test_retries_on_429_5xx_and_malformed(server, tmp_path):
    server.script = [("status", 429), ("status", 503), "this is not json", {"surface": 3}, GOOD]
    judge = make_judge(server, tmp_path, max_retries=5)
    result = judge.judge("q2", "?", "gt", "pred")
    assert result is not None and result.total == 9
    assert len(server.requests) == 5


def test_timeouts_are_retried(server, tmp_path):
    server.script = [("sleep", 0.5), GOOD]
    judge = make_judge(server, tmp_path, timeout=0.1, max_retries=2)
    assert judge.judge("q3", "?", "gt", "pred").total == 9


def test_exhausted_retries_leave_the_item_unjudged(server, tmp_path):
    server.script = ["garbage"] * 3
    judge = make_judge(server, tmp_path, max_retries=2)
    assert judge.judge("q4", "?", "gt", "pred") is None
    assert judge.failures == 1 and "malformed" in judge.last_error


def test_non_retryable_status_raises(server, tmp_path):
    server.script = [("status", 401)]
    with pytest.raises(JudgeError, match="401"):
        make_judge(server, tmp_path).judge("q5", "?", "gt", "pred")


def test_settings_from_environment(monkeypatch):
    monkeypatch.setenv("SCAN2QA_JUDGE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("SCAN2QA_JUDGE_MODEL", "m")
    monkeypatch.delenv("SCAN2QA_JUDGE_KEY", raising=False)
    settings = JudgeSettings.from_env()
    assert settings.configured and settings.endpoint == "http://127.0.0.1:9/v1/chat/completions"
    monkeypatch.delenv("SCAN2QA_JUDGE_URL")
    assert not JudgeSettings.from_env().configured


def _fsd_qa():
    from tests.test_scoring_support import pinpoint_rows, qa_frame

    return qa_frame(pinpoint_rows(2))


def test_evaluate_scores_fsd_through_the_judge(server, tmp_path):
    qa = _fsd_qa()
    predictions = {r["id"]: r["ground_truth"] for r in qa.iter_rows(named=True)}
    report = evaluate(qa, predictions, "harness", make_judge(server, tmp_path))
    group = report["groups"][0]
    assert group["tasks"]["free_form_localization"] == pytest.approx(0.9)
    assert report["fsd_scored"] is True and len(server.requests) == 2
    evaluate(qa, predictions, "harness", make_judge(server, tmp_path))
    assert len(server.requests) == 2  # rescoring is free


def test_without_a_judge_fsd_is_not_scored_and_says_so():
    qa = _fsd_qa()
    predictions = {r["id"]: r["ground_truth"] for r in qa.iter_rows(named=True)}
    report = evaluate(qa, predictions, "harness", None)
    group = report["groups"][0]
    assert group["tasks"]["free_form_localization"] is None
    assert group["macro"]["free_form_localization"] is None
    assert group["avg_micro"] == 1.0  # the other three tasks, FSD left out of the mean
    assert report["fsd_scored"] is False
    assert any("not scored" in note for note in report["notes"])


def test_server_without_json_mode_gets_the_request_again_without_it(server, tmp_path):
    server.script = [("status", 400), GOOD]
    judge = make_judge(server, tmp_path)
    assert judge.judge("q6", "?", "gt", "pred").total == 9
    assert "response_format" in server.requests[0]["body"]
    assert "response_format" not in server.requests[1]["body"]
