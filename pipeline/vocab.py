"""Label vocabularies that decide how an object is treated downstream.

Structural surfaces (walls, floors, ceilings) are never question targets or
neighbours; the PinpointQA small-object vocabulary decides which objects are
localisation targets and which visibility rule (pixel floor) applies. The
vocabulary is a copy of PinpointQA's appendix A.2 list (109 raw label
variants) so that nothing reads a fixture at run time.
"""

from __future__ import annotations

STRUCTURAL_LABELS: frozenset[str] = frozenset(
    {
        "wall",
        "walls",
        "floor",
        "ceiling",
        "closet wall",
        "closet walls",
        "closet floor",
        "closet ceiling",
        "wall board",
        "beam",
        "pillar",
        "column",
    }
)

# PinpointQA appendix A.2, in the paper's order: 43 ScanNet200 labels, then 66 ScanNet++-style labels.
SMALL_OBJECT_LABELS: tuple[str, ...] = (
    "bag", "backpack", "book", "bottle", "bowl", "candle", "cup", "dumbbell", "hair dryer", "hat", "headphones",
    "keyboard", "laptop", "mouse", "purse", "shoe", "tissue box", "water bottle", "alarm clock", "ball",
    "stuffed animal", "plate", "clock", "cd case", "coffee kettle", "paper towel roll", "scale", "soap dish",
    "soap dispenser", "telephone", "toaster", "tray", "water pitcher", "fire extinguisher", "paper cutter",
    "plunger", "dustpan", "broom", "power strip", "toilet paper", "guitar", "toaster oven", "paper bag", "key",
    "phone", "smartphone", "mobile phone", "earbuds", "earphones", "wireless headphones", "headset",
    "headphone case", "remote control", "tv remote", "remote controller", "remote", "tv controller",
    "game controller", "charger", "power adapter", "laptop charger", "phone charger", "power bank",
    "wireless charger", "power plug", "adapter", "dongle", "usb hub", "extension cord", "power cord", "cable",
    "wallet", "handbag", "tote bag", "glasses", "eyeglasses", "glasses case", "mouse pad", "mousepad", "pen",
    "pencil", "marker", "highlighter", "notebook", "notepad", "mug", "spray bottle", "lotion bottle",
    "deodorant bottle", "toothbrush", "razor", "comb", "hairbrush", "scissors", "stapler", "tape dispenser",
    "glue bottle", "calculator", "lanyard", "pen holder", "pencil holder", "pencil case", "post it note",
    "sticky note", "phone stand", "tissue", "eraser", "soap", "power extension",
)

# Spellings PinpointQA reports under one category.
SMALL_OBJECT_SYNONYMS: dict[str, str] = {
    "phone": "phone",
    "smartphone": "phone",
    "mobile phone": "phone",
    "remote control": "remote control",
    "tv remote": "remote control",
    "remote controller": "remote control",
    "remote": "remote control",
    "tv controller": "remote control",
    "mouse pad": "mousepad",
    "mousepad": "mousepad",
}

_SMALL_OBJECT_SET = frozenset(SMALL_OBJECT_LABELS)


def normalize_label(label: str) -> str:
    return " ".join(str(label).strip().lower().split())


def is_structural(*labels: str) -> bool:
    """True when any of the given spellings (raw label, mapped category) is a structural surface."""
    return any(normalize_label(label) in STRUCTURAL_LABELS for label in labels if label)


def is_small_object(raw_label: str) -> bool:
    """Exact (lowercase) match against the small-object vocabulary, as PinpointQA selects targets."""
    return normalize_label(raw_label) in _SMALL_OBJECT_SET


def small_object_category(raw_label: str) -> str:
    """The category PinpointQA reports for a small-object label (synonyms merged)."""
    label = normalize_label(raw_label)
    return SMALL_OBJECT_SYNONYMS.get(label, label)
