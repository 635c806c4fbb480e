"""ScanNet v2 label-map rows for every label the generator emits.

Rows whose raw_category exists in ScanNet's ``scannetv2-labels.combined.tsv``
are copied verbatim (so nyu40 ids are the real ones); the few PinpointQA labels
ScanNet never annotated get rows in the same shape as ScanNet's other small
props (nyu40 ``otherprop`` = 40, eigen13 ``Objects`` = 7, mpcat40 ``objects``).
"""

from __future__ import annotations

HEADER = 'id\traw_category\tcategory\tcount\tnyu40id\teigen13id\tnyuClass\tnyu40class\teigen13class\tModelNet40\tModelNet10\tShapeNetCore55\tsynsetoffset\twnsynsetid\twnsynsetkey\tmpcat40\tmpcat40index'

SCANNET_ROWS = (
    '572\talarm clock\talarm clock\t16\t40\t7\talarm clock\totherprop\tObjects\t\t\tclock\t3046257\tn02694662\talarm_clock.n.01\tobjects\t39',
    '23\tarmchair\tarmchair\t281\t5\t4\tchair\tchair\tChair\tchair\tchair\tchair\t3001627\tn02738535\tarmchair.n.01\tchair\t3',
    '48\tbackpack\tbackpack\t479\t40\t7\tbackpack\totherprop\tObjects\t\t\t\t\tn02769748\tbackpack.n.01\tobjects\t39',
    '168\tball\tball\t39\t40\t7\tball\totherprop\tObjects\t\t\t\t\t\t\tobjects\t39',
    '42\tbathtub\tbathtub\t144\t36\t7\tbathtub\tbathtub\tObjects\tbathtub\tbathtub\ttub\t2808440\tn02808440\tbathtub.n.01\tbathtub\t25',
    '11\tbed\tbed\t370\t4\t1\tbed\tbed\tBed\tbed\tbed\tbed\t2818832\tn02818832\tbed.n.01\tbed\t11',
    '22\tbook\tbook\t318\t23\t2\tbook\tbooks\tBooks\t\t\t\t\tn02870526\tbook.n.11\tobjects\t39',
    '18\tbookshelf\tbookshelf\t360\t10\t6\tbookshelf\tbookshelf\tFurniture\tbookshelf\t\tbookshelf\t2871439\tn02871439\tbookshelf.n.01\tshelving\t31',
    '65\tbottle\tbottle\t226\t40\t7\tbottle\totherprop\tObjects\tbottle\t\tbottle\t2876657\tn02876657\tbottle.n.01\tobjects\t39',
    '562\tbowl\tbowl\t24\t40\t7\tbowl\totherprop\tObjects\tbowl\t\tbowl\t2880940\tn02880940\tbowl.n.03\tobjects\t39',
    '7\tcabinet\tcabinet\t731\t3\t6\tcabinet\tcabinet\tFurniture\t\t\tcabinet\t2933112\tn02933112\tcabinet.n.01\tcabinet\t7',
    '286\tcandle\tcandle\t12\t40\t7\tcandle\totherprop\tObjects\tlamp\t\t\t\tn02948072\tcandle.n.01\tobjects\t39',
    '41\tceiling\tceiling\t806\t22\t3\tceiling\tceiling\tCeiling\t\t\t\t\tn02990373\tceiling.n.01\tceiling\t17',
    '2\tchair\tchair\t4646\t5\t4\tchair\tchair\tChair\tchair\tchair\tchair\t3001627\tn03001627\tchair.n.01\tchair\t3',
    '24\tcoffee table\tcoffee table\t258\t7\t10\tcoffee table\ttable\tTable\ttable\ttable\ttable\t4379243\tn03063968\tcoffee_table.n.01\ttable\t5',
    '35\tcounter\tcounter\t104\t12\t6\tcounter\tcounter\tFurniture\ttable\ttable\ttable\t4379243\tn03116530\tcounter.n.01\tcounter\t26',
    '130\tcup\tcup\t157\t40\t7\tcup\totherprop\tObjects\tcup\t\tcup or mug\t3797390\tn03797390\tmug.n.04\tobjects\t39',
    '9\tdesk\tdesk\t680\t14\t10\tdesk\tdesk\tTable\tdesk\tdesk\ttable\t4379243\tn03179701\tdesk.n.01\ttable\t5',
    '45\tdining table\tdining table\t19\t7\t10\ttable\ttable\tTable\ttable\ttable\ttable\t4379243\tn04379243\ttable.n.02\ttable\t5',
    '5\tdoor\tdoor\t1483\t8\t12\tdoor\tdoor\tWall\tdoor\t\t\t\tn03221720\tdoor.n.01\tdoor\t4',
    '36\tdresser\tdresser\t213\t17\t6\tdresser\tdresser\tFurniture\tdresser\tdresser\t\t\tn03015254\tchest_of_drawers.n.01\tchest_of_drawers\t13',
    '44\tend table\tend table\t147\t7\t10\ttable\ttable\tTable\ttable\ttable\ttable\t4379243\tn04379243\ttable.n.02\ttable\t5',
    '3\tfloor\tfloor\t1553\t2\t5\tfloor\tfloor\tFloor\t\t\t\t\tn03365592\tfloor.n.01\tfloor\t2',
    '312\theadphones\theadphones\t12\t40\t7\t\totherprop\tObjects\t\t\t\t\tn03261776\tearphone.n.01\tobjects\t39',
    '46\tkeyboard\tkeyboard\t246\t40\t7\tkeyboard\totherprop\tObjects\tkeyboard\t\tcomputer keyboard\t3085013\tn03085013\tcomputer_keyboard.n.01\tobjects\t39',
    '29\tkitchen cabinet\tkitchen cabinet\t310\t3\t6\tcabinet\tcabinet\tFurniture\t\t\t\t\tn02933112\tcabinet.n.01\tcabinet\t7',
    '28\tlamp\tlamp\t419\t35\t7\tlamp\tlamp\tObjects\tlamp\t\tlamp\t3636649\tn03636649\tlamp.n.02\tlighting\t28',
    '77\tlaptop\tlaptop\t111\t40\t7\tlaptop\totherprop\tObjects\tlaptop\t\tlaptop\t3642806\tn03642806\tlaptop.n.01\tobjects\t39',
    '19\tmonitor\tmonitor\t765\t40\t7\tmonitor\totherprop\tObjects\tmonitor\tmonitor\ttv or monitor\t3211117\tn03782190\tmonitor.n.04\tobjects\t39',
    '202\tmouse\tmouse\t49\t40\t7\tmouse\totherprop\tObjects\t\t\t\t\tn03793489\tmouse.n.04\tobjects\t39',
    '1269\tmug\tmug\t3\t40\t7\tcup\totherprop\tObjects\tcup\t\tcup or mug\t3797390\tn03797390\tmug.n.04\tobjects\t39',
    '34\tnightstand\tnightstand\t224\t32\t6\tnight stand\tnight stand\tFurniture\tnight_stand\tnight_stand\t\t\tn03015254\tchest_of_drawers.n.01\tchest_of_drawers\t13',
    '10\toffice chair\toffice chair\t595\t5\t4\tchair\tchair\tChair\tchair\tchair\tchair\t3001627\tn04373704\tswivel_chair.n.01\tchair\t3',
    '40\tplant\tplant\t331\t40\t7\tplant\totherprop\tObjects\tplant\t\t\t\tn00017222\tplant.n.02\tplant\t14',
    '88\tplate\tplate\t24\t40\t7\tplate\totherprop\tObjects\t\t\t\t\tn03959485\tplate.n.04\tobjects\t39',
    '1186\tpower strip\tpower strip\t13\t40\t7\t\totherprop\tObjects\t\t\t\t\t\t\tobjects\t39',
    '27\trefrigerator\trefrigerator\t154\t24\t6\trefrigerator\trefrigerator\tFurniture\t\t\t\t\tn04070727\trefrigerator.n.01\tappliances\t37',
    '231\tremote\tremote\t6\t40\t7\t\totherprop\tObjects\t\t\tremote_control\t4074963\tn04074963\tremote_control.n.01\tobjects\t39',
    '8\tshelf\tshelf\t641\t15\t6\tshelves\tshelves\tFurniture\tbookshelf\t\tbookshelf\t2871439\tn02871439\tbookshelf.n.01\tshelving\t31',
    '63\tshoe\tshoe\t17\t40\t7\tshoe\totherprop\tObjects\t\t\t\t\tn04199027\tshoe.n.01\tclothes\t38',
    '14\tsink\tsink\t488\t34\t7\tsink\tsink\tObjects\tsink\t\t\t\tn04223580\tsink.n.01\tsink\t15',
    '92\tsoap\tsoap\t9\t40\t7\tsoap\totherprop\tObjects\t\t\t\t\tn04253437\tsoap.n.01\tobjects\t39',
    '1313\tsofa\tsofa\t1\t6\t9\tsofa\tsofa\tSofa\tsofa\tsofa\tsofa\t4256520\tn04256520\tsofa.n.01\tsofa\t10',
    '435\tstapler\tstapler\t6\t40\t7\tstapler\totherprop\tObjects\t\t\t\t\tn04303497\tstapler.n.01\tobjects\t39',
    '38\tstool\tstool\t221\t40\t7\tstool\totherprop\tObjects\tstool\t\t\t\tn04326896\tstool.n.01\tstool\t19',
    '4\ttable\ttable\t1170\t7\t10\ttable\ttable\tTable\ttable\ttable\ttable\t4379243\tn04379243\ttable.n.02\ttable\t5',
    '28\ttable lamp\tlamp\t3\t35\t7\tlamp\tlamp\tObjects\tlamp\t\tlamp\t3636649\tn04380533\ttable_lamp.n.01\tlighting\t28',
    '230\ttissue box\ttissue box\t73\t40\t7\ttissue box\totherprop\tObjects\t\t\t\t\tn02883344\tbox.n.01\tobjects\t39',
    '17\ttoilet\ttoilet\t256\t33\t7\ttoilet\ttoilet\tObjects\ttoilet\ttoilet\t\t\tn04446276\ttoilet.n.01\ttoilet\t18',
    '49\ttoilet paper\ttoilet paper\t291\t40\t7\ttoilet paper\totherprop\tObjects\t\t\t\t\tn15075141\ttoilet_tissue.n.01\tobjects\t39',
    '1135\ttoothbrush\ttoothbrush\t8\t40\t7\ttoothbrush\totherprop\tObjects\t\t\t\t\tn04453156\ttoothbrush.n.01\tobjects\t39',
    '56\ttrash can\ttrash can\t1090\t39\t6\tgarbage bin\totherfurniture\tFurniture\t\t\ttrash_bin\t2747177\tn02747177\tashcan.n.01\tobjects\t39',
    '33\ttv\ttv\t219\t25\t11\ttelevision\ttelevision\tTV\t\t\ttv or monitor\t3211117\tn03211117\tdisplay.n.06\ttv_monitor\t22',
    '51\ttv stand\ttv stand\t61\t39\t6\ttv stand\totherfurniture\tFurniture\ttv_stand\t\t\t\tn03290653\tentertainment_center.n.01\tfurniture\t36',
    '1\twall\twall\t8277\t1\t12\twall\twall\tWall\t\t\t\t\tn04546855\twall.n.01\twall\t1',
    '99\twardrobe\twardrobe\t1\t39\t6\twardrobe\totherfurniture\tFurniture\twardrobe\t\t\t\tn04550184\twardrobe.n.01\tfurniture\t36',
    '392\twater bottle\twater bottle\t15\t40\t7\tbottle\totherprop\tObjects\tbottle\t\tbottle\t2876657\tn04557648\twater_bottle.n.01\tobjects\t39',
    '16\twindow\twindow\t1209\t9\t13\twindow\twindow\tWindow\t\t\t\t\tn04587648\twindow.n.01\twindow\t9',
)

# (id, label, nyuClass): PinpointQA labels absent from ScanNet's map, ids after ScanNet's largest (1357).
_ADDED = (
    (1358, "calculator", "calculator"),
    (1359, "charger", "charger"),
    (1360, "game controller", "controller"),
    (1361, "glasses", "glasses"),
    (1362, "key", "key"),
    (1363, "notebook", "notebook"),
    (1364, "pen", "pen"),
    (1365, "phone", "telephone"),
    (1366, "power bank", "power bank"),
    (1367, "scissors", "scissors"),
    (1368, "wallet", "wallet"),
)

ADDED_ROWS = tuple(
    "\t".join([str(i), label, label, "1", "40", "7", nyu_class, "otherprop", "Objects", "", "", "", "", "", "", "objects", "39"])
    for i, label, nyu_class in _ADDED
)


def label_map_rows() -> list[str]:
    """Every row, sorted by raw_category so the written file never depends on code order."""
    return sorted(SCANNET_ROWS + ADDED_ROWS, key=lambda row: row.split("\t")[1])


def nyu40_ids() -> dict[str, int]:
    """raw_category -> nyu40id."""
    return {row.split("\t")[1]: int(row.split("\t")[4]) for row in label_map_rows()}


def write_label_map(path) -> None:
    """Write ``scannetv2-labels.combined.tsv`` with ScanNet's columns and CRLF line ends, as the real file has."""
    text = "\r\n".join([HEADER, *label_map_rows()]) + "\r\n"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
