"""Question wordings, answer sentences and answer-format instructions of the four PinpointQA tasks.

Several wordings per task keep models from keying on one phrasing; which one a
question uses is a seeded choice, and its id goes in ``qa.template``. The
instruction states the answer format the scorer parses (SPEC §6).
"""

from __future__ import annotations

QUESTION_TYPES: tuple[str, ...] = ("presence", "reference_mcq", "free_form_localization", "structured_localization")

# "{a_target}" is the label with its indefinite article ("a chair", "an alarm clock"): ``with_article``.
PRESENCE_QUESTIONS: dict[str, str] = {
    "tpv_1": "Is there {a_target} in the video?",
    "tpv_2": "Does {a_target} appear anywhere in this video?",
    "tpv_3": "Can you find {a_target} in the scene shown in the video?",
}

# Vowel letters that sound like a consonant, and silent h: the exceptions to "an before a vowel letter".
_A_BEFORE = ("one", "once", "uni", "use", "usu", "usb", "ute", "eu", "ewe", "ure")
_AN_BEFORE = ("hour", "honest", "honor", "honour", "heir")


def with_article(noun: str) -> str:
    """The noun with "a" or "an" by its first sound (ReVSI's templates avoid articles by saying "the")."""
    word = noun.strip().lower()
    if word.startswith(_AN_BEFORE):
        return f"an {noun}"
    if word[:1] in "aeiou" and not word.startswith(_A_BEFORE):
        return f"an {noun}"
    return f"a {noun}"

REFERENCE_QUESTIONS: dict[str, str] = {
    "nri_1": "Which of the following objects is closest to the {target}, not counting the surface it is placed on?",
    "nri_2": "Apart from the surface it rests on, which object is nearest to the {target}?",
    "nri_3": "Which of these objects is the nearest reference for locating the {target} (ignore its supporting surface)?",
}

FREE_FORM_QUESTIONS: dict[str, str] = {
    "fsd_1": "Where is the {target} located? Describe its position using the surface it is on and nearby objects.",
    "fsd_2": "Describe precisely where the {target} is in this scene, so that someone could find it.",
    "fsd_3": "Explain where to find the {target}, mentioning nearby objects and how far it is from them.",
}

STRUCTURED_QUESTIONS: dict[str, str] = {
    "ssp_1": (
        "Give the location of the {target} as structured output: its supporting surface and nearby reference objects."
    ),
    "ssp_2": (
        "Localize the {target}: report the surface it rests on and the closest reference objects with their "
        "relations and distances."
    ),
}

INSTRUCTIONS: dict[str, str] = {
    "presence": "Answer with Yes or No only.",
    "reference_mcq": "Answer with the option's letter from the given choices directly.",
    "free_form_localization": (
        "Answer in one or two sentences: name the surface the object is on (if any), then up to two nearby "
        "reference objects with their spatial relation and distance in centimeters."
    ),
    "structured_localization": (
        'Output only a JSON object of the form {"target": "<object>", "support_surface": "<surface, or null>", '
        '"references": [{"object": "<object>", "relation": "<one of on, under, above, below, side_above, '
        'side_below, next_to, near, attached_to>", "distance_cm": <number>}]} with at most two references and '
        "distances in centimeters with one decimal."
    ),
}

# How each relation reads in a sentence ("the mug is {phrase} the laptop").
RELATION_PHRASES: dict[str, str] = {
    "on": "on",
    "under": "under",
    "above": "above",
    "below": "below",
    "side_above": "above and to the side of",
    "side_below": "below and to the side of",
    "next_to": "next to",
    "near": "near",
    "attached_to": "attached to",
}

# Opening sentence naming the supporting surface.
SURFACE_SENTENCES: dict[str, str] = {
    "surface_1": "The {target} is on the {surface}.",
    "surface_2": "The {target} rests on the {surface}.",
    "surface_3": "You can find the {target} on the {surface}.",
}

# Opening sentence when there is no supporting surface: the closest reference anchors the description.
ANCHOR_SENTENCES: dict[str, str] = {
    "anchor_1": "The {target} is {relation} the {reference}, about {distance} cm away.",
    "anchor_2": "The {target} can be found {relation} the {reference}, roughly {distance} cm from it.",
}

# Follow-up sentence listing one or two references ("{refs}" = "next to the lamp (12 cm away) and ...").
REFERENCE_SENTENCES: dict[str, str] = {
    "refs_1": "It is {refs}.",
    "refs_2": "Nearby, it is {refs}.",
}
REFERENCE_CLAUSE = "{relation} the {reference} ({distance} cm away)"
