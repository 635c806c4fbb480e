"""The FSD judge: an OpenAI-compatible chat endpoint that grades free-form localisations.

PinpointQA grades fine-grained spatial descriptions with an LLM and a fixed
rubric (Appendix B.1). Any chat-completions server works (a hosted API, vLLM,
llama.cpp, Ollama), so the client speaks the bare protocol with ``urllib``.
Judgments are checked against the rubric in code, never trusted: dimension
scores are clipped to their maxima, the total is recomputed as their sum and
capped at 2 when both the surface and the references score 0. Every judgment is
stored in a JSON-lines cache keyed by (question id, prediction), so rescoring a
predictions file costs nothing and reproduces the same numbers.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

DIMENSIONS: dict[str, int] = {"surface": 3, "references": 2, "relations": 2, "distances": 2, "clarity": 1}
NO_ANCHOR_CAP = 2.0
ERROR_TAGS: tuple[str, ...] = (
    "wrong_surface",
    "missing_surface",
    "wrong_reference",
    "missing_reference",
    "unsupported_reference",
    "wrong_relation",
    "vague_relation",
    "wrong_distance",
    "missing_distance",
    "unclear",
    "no_localization",
)
ENV_URL, ENV_MODEL, ENV_KEY = "SCAN2QA_JUDGE_URL", "SCAN2QA_JUDGE_MODEL", "SCAN2QA_JUDGE_KEY"

RUBRIC = f"""You grade how well a model's description localises a small target object in an indoor scene.
Compare the PREDICTION with the GROUND TRUTH description. Credit only information supported by the ground truth;
never reward extra references just because they are plausible in the scene.

Score five dimensions (integers or halves):
- surface (0-3): the main location / supporting surface the target rests on.
- references (0-2): the key reference objects of the ground truth; penalise unsupported or hallucinated references.
- relations (0-2): the spatial relations to those references; penalise replacing a directional relation with vague
  proximity ("near") when the ground truth is directional.
- distances (0-2): numeric distances; tolerance grows with the true distance (about +-5 cm up to 10 cm, +-10 cm up to
  30 cm, +-15 cm beyond); missing numbers get 0.
- clarity (0-1): whether a person could follow the description.
If surface and references are both 0, or the prediction carries almost no usable localisation, the total must not
exceed {NO_ANCHOR_CAP:g}. The total is the sum of the five dimensions.

Reply with one JSON object and nothing else:
{{"total": <number>, "surface": <number>, "references": <number>, "relations": <number>, "distances": <number>,
 "clarity": <number>, "explanation": "<one or two sentences>", "error_tags": [<zero or more of {list(ERROR_TAGS)}>]}}"""


class JudgeError(Exception):
    """The judge endpoint refused the request in a way retrying cannot fix (bad key, unknown model, ...)."""


class JudgmentFormatError(ValueError):
    """The judge replied, but not with a judgment that follows the requested JSON shape."""


@dataclass
class JudgeSettings:
    url: str | None = None  # base URL (".../v1") or the full ".../chat/completions" address
    model: str | None = None
    key: str | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff: float = 1.0  # first retry delay in seconds; doubles each attempt
    max_backoff: float = 30.0
    json_mode: bool = True  # ask for response_format=json_object (servers that reject it: set False)
    cache_path: str | None = None

    @classmethod
    def from_env(cls, **overrides) -> "JudgeSettings":
        values = {"url": os.environ.get(ENV_URL), "model": os.environ.get(ENV_MODEL), "key": os.environ.get(ENV_KEY)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def configured(self) -> bool:
        return bool(self.url and self.model)

    @property
    def endpoint(self) -> str:
        url = (self.url or "").rstrip("/")
        return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


@dataclass
class Judgment:
    total: float
    surface: float
    references: float
    relations: float
    distances: float
    clarity: float
    explanation: str = ""
    error_tags: list[str] = field(default_factory=list)
    model: str | None = None

    @property
    def normalized(self) -> float:
        """The FSD score in [0, 1]."""
        return self.total / 10.0

    def to_dict(self) -> dict:
        return asdict(self)


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise JudgmentFormatError(f"dimension {name!r} is not a number: {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise JudgmentFormatError(f"dimension {name!r} is not a number: {value!r}") from None
    if number != number:
        raise JudgmentFormatError(f"dimension {name!r} is NaN")
    return number


def apply_rubric(raw: dict, model: str | None = None) -> Judgment:
    """Validate a raw judgment and enforce the rubric: clip dimensions, recompute and cap the total."""
    if not isinstance(raw, dict):
        raise JudgmentFormatError("judgment is not a JSON object")
    scores = raw.get("scores") if isinstance(raw.get("scores"), dict) else raw
    dims = {}
    for name, maximum in DIMENSIONS.items():
        if name not in scores:
            raise JudgmentFormatError(f"judgment lacks the {name!r} score")
        dims[name] = min(max(_number(scores[name], name), 0.0), float(maximum))
    total = sum(dims.values())
    if dims["surface"] == 0 and dims["references"] == 0:
        total = min(total, NO_ANCHOR_CAP)
    tags = raw.get("error_tags", [])
    tags = [str(t).strip().lower() for t in tags] if isinstance(tags, list) else []
    return Judgment(
        total=round(total, 6),
        explanation=str(raw.get("explanation", ""))[:2000],
        error_tags=sorted({t for t in tags if t in ERROR_TAGS}),
        model=model,
        **dims,
    )


def parse_judgment_text(content: str, model: str | None = None) -> Judgment:
    """Read the judge's reply text (bare JSON, fenced JSON or JSON inside prose) into a checked judgment."""
    from pipeline.scoring.ssp import extract_json_object

    obj = extract_json_object(content)
    if obj is None:
        raise JudgmentFormatError(f"no JSON object in the judge reply: {str(content)[:80]!r}")
    return apply_rubric(obj, model)


def cache_key(question_id: str, prediction: str) -> str:
    return hashlib.sha256(f"{question_id}\x1f{prediction}".encode()).hexdigest()


class JudgeCache:
    """Append-only JSON-lines store of judgments; the last line for a key wins."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._entries: dict[str, Judgment] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    record = json.loads(line)
                    self._entries[record["key"]] = Judgment(**record["judgment"])
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line from an interrupted run is skipped, not fatal

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, question_id: str, prediction: str) -> Judgment | None:
        return self._entries.get(cache_key(question_id, prediction))

    def put(self, question_id: str, prediction: str, judgment: Judgment) -> None:
        key = cache_key(question_id, prediction)
        self._entries[key] = judgment
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": key, "id": question_id, "judgment": judgment.to_dict()}, sort_keys=True) + "\n")
            fh.flush()


_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class FsdJudge:
    """Grades FSD predictions through a chat-completions endpoint, with retries and a persistent cache."""

    def __init__(self, settings: JudgeSettings, cache: JudgeCache | None = None, sleep=time.sleep):
        if not settings.configured:
            raise JudgeError(f"no judge endpoint: set {ENV_URL} and {ENV_MODEL} (or pass url and model)")
        self.settings = settings
        self.cache = cache if cache is not None else (JudgeCache(settings.cache_path) if settings.cache_path else None)
        self._sleep = sleep
        self.requests_sent = 0
        self.failures = 0
        self.last_error: str | None = None

    def messages(self, question: str, ground_truth: str, prediction: str) -> list[dict]:
        user = f"QUESTION: {question}\n\nGROUND TRUTH: {ground_truth}\n\nPREDICTION: {prediction}"
        return [{"role": "system", "content": RUBRIC}, {"role": "user", "content": user}]

    def judge(self, question_id: str, question: str, ground_truth: str, prediction: str) -> Judgment | None:
        """A checked judgment, from the cache when possible; None when the endpoint never gave a usable one."""
        if self.cache is not None:
            cached = self.cache.get(question_id, prediction)
            if cached is not None:
                return cached
        judgment = self._ask(self.messages(question, ground_truth, prediction))
        if judgment is None:
            self.failures += 1
            return None
        if self.cache is not None:
            self.cache.put(question_id, prediction, judgment)
        return judgment

    def _delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after:
            try:
                return min(max(float(retry_after), 0.0), self.settings.max_backoff)
            except ValueError:
                pass
        return min(self.settings.backoff * (2**attempt), self.settings.max_backoff)

    def _ask(self, messages: list[dict]) -> Judgment | None:
        body = {"model": self.settings.model, "messages": messages, "temperature": 0}
        if self.settings.json_mode:
            body["response_format"] = {"type": "json_object"}
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.settings.key:
            headers["Authorization"] = f"Bearer {self.settings.key}"
        data = json.dumps(body).encode()
        json_mode_dropped = False
        for attempt in range(self.settings.max_retries + 1):
            retry_after = None
            try:
                request = urllib.request.Request(self.settings.endpoint, data=data, headers=headers, method="POST")
                self.requests_sent += 1
                with urllib.request.urlopen(request, timeout=self.settings.timeout) as response:
                    payload = json.loads(response.read().decode("utf-8"))
                content = payload["choices"][0]["message"]["content"]
                return parse_judgment_text(content, self.settings.model)
            except urllib.error.HTTPError as exc:
                self.last_error = f"HTTP {exc.code} from {self.settings.endpoint}"
                if exc.code == 400 and "response_format" in body and not json_mode_dropped:
                    # servers without JSON mode reject response_format; the rubric already demands bare JSON
                    body.pop("response_format")
                    data, json_mode_dropped = json.dumps(body).encode(), True
                    continue
                if exc.code not in _RETRYABLE_STATUS:
                    raise JudgeError(f"judge endpoint {self.settings.endpoint} answered HTTP {exc.code}") from None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
            except (ValueError, KeyError, IndexError, TypeError) as exc:  # malformed payload or judgment
                self.last_error = f"malformed judgment: {exc}"
            if attempt < self.settings.max_retries:
                self._sleep(self._delay(attempt, retry_after))
        return None
