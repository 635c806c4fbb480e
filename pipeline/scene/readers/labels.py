"""ScanNet label maps: raw annotation label -> category, NYU40 id, ScanNet200 id.

Two generations of the map exist. ScanNet v2 ships
``scannetv2-labels.combined.tsv`` (columns ``id, raw_category, category,
nyu40id, ...``); ScanNet v1 shipped ``scannet-labels.combined.tsv`` whose
``category`` column holds the raw label and which has no cleaned category.
Both are read one line per row (either line end: the v2 file is distributed
with CRLF line ends), each line parsed by the csv module in strict mode. No
label spans two lines, so a line whose quote does not close, whose field is
over csv's field limit or whose bytes are not UTF-8 is one bad row, skipped and
counted by its line number (``LabelMap.skipped_rows``), never a quote that
swallows the rows after it or an error that names no row. A header that is not
a label map's is an error. The file is at most ``MAX_LABEL_MAP_BYTES`` (ScanNet's
is 56 kB), read through ``file_checks.read_root_file``.

ScanNet200 classes are identified by the v2 map's ``id`` column of the raw
label's row (that is how the ScanNet200 benchmark defines them); with a v1 map
or for a raw label equal to a ScanNet200 name the name decides.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

V2_FILENAME = "scannetv2-labels.combined.tsv"
MAX_LABEL_MAP_BYTES = 8 << 20  # 8 MiB, over 100 times ScanNet's map; every scan reads the whole file
MAX_SKIPPED_NAMED = 3  # bad rows named in the warning (all are counted)
V1_FILENAME = "scannet-labels.combined.tsv"
LABEL_MAP_FILENAMES: tuple[str, ...] = (V2_FILENAME, V1_FILENAME)

# ScanNet200 benchmark classes (VALID_CLASS_IDS_200 / CLASS_LABELS_200 of ScanNet's scannet200_constants.py).
SCANNET200_CLASSES: tuple[tuple[int, str], ...] = (
    (1, "wall"), (2, "chair"), (3, "floor"), (4, "table"), (5, "door"), (6, "couch"), (7, "cabinet"), (8, "shelf"),
    (9, "desk"), (10, "office chair"), (11, "bed"), (13, "pillow"), (14, "sink"), (15, "picture"), (16, "window"),
    (17, "toilet"), (18, "bookshelf"), (19, "monitor"), (21, "curtain"), (22, "book"), (23, "armchair"),
    (24, "coffee table"), (26, "box"), (27, "refrigerator"), (28, "lamp"), (29, "kitchen cabinet"), (31, "towel"),
    (32, "clothes"), (33, "tv"), (34, "nightstand"), (35, "counter"), (36, "dresser"), (38, "stool"),
    (39, "cushion"), (40, "plant"), (41, "ceiling"), (42, "bathtub"), (44, "end table"), (45, "dining table"),
    (46, "keyboard"), (47, "bag"), (48, "backpack"), (49, "toilet paper"), (50, "printer"), (51, "tv stand"),
    (52, "whiteboard"), (54, "blanket"), (55, "shower curtain"), (56, "trash can"), (57, "closet"), (58, "stairs"),
    (59, "microwave"), (62, "stove"), (63, "shoe"), (64, "computer tower"), (65, "bottle"), (66, "bin"),
    (67, "ottoman"), (68, "bench"), (69, "board"), (70, "washing machine"), (71, "mirror"), (72, "copier"),
    (73, "basket"), (74, "sofa chair"), (75, "file cabinet"), (76, "fan"), (77, "laptop"), (78, "shower"),
    (79, "paper"), (80, "person"), (82, "paper towel dispenser"), (84, "oven"), (86, "blinds"), (87, "rack"),
    (88, "plate"), (89, "blackboard"), (90, "piano"), (93, "suitcase"), (95, "rail"), (96, "radiator"),
    (97, "recycling bin"), (98, "container"), (99, "wardrobe"), (100, "soap dispenser"), (101, "telephone"),
    (102, "bucket"), (103, "clock"), (104, "stand"), (105, "light"), (106, "laundry basket"), (107, "pipe"),
    (110, "clothes dryer"), (112, "guitar"), (115, "toilet paper holder"), (116, "seat"), (118, "speaker"),
    (120, "column"), (121, "bicycle"), (122, "ladder"), (125, "bathroom stall"), (128, "shower wall"), (130, "cup"),
    (131, "jacket"), (132, "storage bin"), (134, "coffee maker"), (136, "dishwasher"), (138, "paper towel roll"),
    (139, "machine"), (140, "mat"), (141, "windowsill"), (145, "bar"), (148, "toaster"), (154, "bulletin board"),
    (155, "ironing board"), (156, "fireplace"), (157, "soap dish"), (159, "kitchen counter"), (161, "doorframe"),
    (163, "toilet paper dispenser"), (165, "mini fridge"), (166, "fire extinguisher"), (168, "ball"), (169, "hat"),
    (170, "shower curtain rod"), (177, "water cooler"), (180, "paper cutter"), (185, "tray"), (188, "shower door"),
    (191, "pillar"), (193, "ledge"), (195, "toaster oven"), (202, "mouse"), (208, "toilet seat cover dispenser"),
    (213, "furniture"), (214, "cart"), (221, "storage container"), (229, "scale"), (230, "tissue box"),
    (232, "light switch"), (233, "crate"), (242, "power outlet"), (250, "decoration"), (261, "sign"),
    (264, "projector"), (276, "closet door"), (283, "vacuum cleaner"), (286, "candle"), (300, "plunger"),
    (304, "stuffed animal"), (312, "headphones"), (323, "dish rack"), (325, "broom"), (331, "guitar case"),
    (342, "range hood"), (356, "dustpan"), (370, "hair dryer"), (392, "water bottle"), (395, "handicap bar"),
    (399, "purse"), (408, "vent"), (417, "shower floor"), (488, "water pitcher"), (540, "mailbox"), (562, "bowl"),
    (570, "paper bag"), (572, "alarm clock"), (581, "music stand"), (609, "projector screen"), (748, "divider"),
    (776, "laundry detergent"), (1156, "bathroom counter"), (1163, "object"), (1164, "bathroom vanity"),
    (1165, "closet wall"), (1166, "laundry hamper"), (1167, "bathroom stall door"), (1168, "ceiling light"),
    (1169, "trash bin"), (1170, "dumbbell"), (1171, "stair rail"), (1172, "tube"), (1173, "bathroom cabinet"),
    (1174, "cd case"), (1175, "closet rod"), (1176, "coffee kettle"), (1178, "structure"), (1179, "shower head"),
    (1180, "keyboard piano"), (1181, "case of water bottles"), (1182, "coat rack"), (1183, "storage organizer"),
    (1184, "folded chair"), (1185, "fire alarm"), (1186, "power strip"), (1187, "calendar"), (1188, "poster"),
    (1189, "potted plant"), (1190, "luggage"), (1191, "mattress"),
)
SCANNET200_IDS: frozenset[int] = frozenset(i for i, _ in SCANNET200_CLASSES)
SCANNET200_ID_BY_NAME: dict[str, int] = {name: i for i, name in SCANNET200_CLASSES}


@dataclass(frozen=True)
class LabelInfo:
    category: str
    nyu40_id: int | None
    scannet200_id: int | None


class LabelMapError(ValueError):
    pass


@dataclass(frozen=True)
class LabelMap:
    entries: dict[str, LabelInfo]  # keyed by the raw label exactly as annotated
    version: str  # "v2" | "v1"
    skipped_rows: tuple[str, ...] = ()  # "line N: why" for each row that could not be parsed, in file order

    def lookup(self, raw_label: str) -> LabelInfo | None:
        info = self.entries.get(raw_label)
        if info is None:
            info = self.entries.get(raw_label.strip().lower())
        return info


def _int_or_none(text: str | None) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _row(line: bytes, number: int) -> list[str]:
    """One line's fields; ``LabelMapError`` naming the line when it is not UTF-8 or not one whole TSV row."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LabelMapError(f"line {number}: not valid UTF-8 (byte {line[exc.start]:#04x} at column {exc.start + 1})")
    try:
        return next(csv.reader([text], delimiter="\t", strict=True), [])
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise LabelMapError(f"line {number}: a quote that does not close on its line") from None
        raise LabelMapError(f"line {number}: {exc}") from None


def _shown_header(fields: list[str]) -> str:
    """The header's first columns, shortened: enough to recognise the file, not a dump of whatever it holds."""
    shown = [repr(f[:40] + ("..." if len(f) > 40 else "")) for f in fields[:6]]
    return "[" + ", ".join(shown) + (", ..." if len(fields) > 6 else "") + "]"


def parse_label_map(data: bytes | str) -> LabelMap:
    """Parse either map generation, recognised by its header; rows that cannot be parsed are skipped, counted."""
    raw_bytes = data.encode("utf-8") if isinstance(data, str) else data
    lines = raw_bytes.splitlines()
    if not lines:
        raise LabelMapError("empty file")
    if lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]  # a byte-order mark some editors write
    header = _row(lines[0], 1)
    columns = set(header)
    if "raw_category" in columns and "category" in columns:
        version = "v2"
    elif "category" in columns and "nyu40id" in columns:
        version = "v1"
    else:
        raise LabelMapError(f"not a ScanNet label map: line 1 has {_shown_header(header)}")
    entries: dict[str, LabelInfo] = {}
    skipped: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            fields = _row(line, number)
        except LabelMapError as exc:
            skipped.append(str(exc))
            continue
        row = dict(zip(header, fields))
        if version == "v2":
            raw = (row.get("raw_category") or "").strip()
            category = (row.get("category") or "").strip() or raw
            s200 = _int_or_none(row.get("id"))
            s200 = s200 if s200 in SCANNET200_IDS else SCANNET200_ID_BY_NAME.get(raw)
        else:
            raw = (row.get("category") or "").strip()
            category = raw
            s200 = SCANNET200_ID_BY_NAME.get(raw)
        if raw and raw not in entries:
            entries[raw] = LabelInfo(category, _int_or_none(row.get("nyu40id")), s200)
    if not entries:
        first = f" ({skipped[0]})" if skipped else ""
        raise LabelMapError(f"label map has no rows{first}")
    return LabelMap(entries, version, tuple(skipped))


def skipped_rows_warning(label_map: LabelMap, name: str) -> list[str]:
    """The scan warning for a map's unparsable rows: how many, and the first few by line number."""
    rows = label_map.skipped_rows
    if not rows:
        return []
    named = "; ".join(rows[:MAX_SKIPPED_NAMED]) + ("; ..." if len(rows) > MAX_SKIPPED_NAMED else "")
    counted = "1 row cannot be parsed and is skipped" if len(rows) == 1 else f"{len(rows)} rows cannot be parsed and are skipped"
    return [f"{name}: {counted} ({named})"]
