"""The official CoNLL-2005 SRL score: hand-built cases, and agreement with ``srl-eval.pl`` itself.

The script ships in the allennlp 0.9.0 wheel (the demo's download).  The wheel is looked
for in ``$ELMOC_WHEEL_CACHE``, the demo's ``resources/downloads/.cache`` and
``~/.cache/elmoc/wheels``; when absent it is fetched once into the last with
``pip download``.  Without perl or the wheel the agreement test skips.
"""
from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from elmoc.metrics.span_f1 import SpanF1, spans
from elmoc.metrics.srl_conll05 import Conll05Score, arguments, props_column
from elmoc.tasks.conll2012 import read_conll2012, srl_instances

REPO = Path(__file__).resolve().parents[2]
WHEEL = "allennlp-0.9.0-py3-none-any.whl"
WHEEL_SHA256 = "353752e7b78e48c450e27889d80a3000c4a9af34f70ff9091b3031ad01320940"  # config/config.yaml's pin
WHEEL_CACHE = Path.home() / ".cache" / "elmoc" / "wheels"


def counts(predicted, gold):
    metric = Conll05Score()
    metric.add(predicted, gold)
    return metric.counts()


def span_counts(predicted, gold):
    metric = SpanF1(ignore_types=("V",))
    metric.add(predicted, gold)
    tp = sum(metric.true_positives.values())
    return tp, metric.num_predicted - tp, metric.num_gold - tp


# A discontinuous gold A1: (0,1) + C-A1 (3,4) around the predicate at 2.
DISCONTINUOUS = ["B-A1", "I-A1", "B-V", "B-C-A1", "I-C-A1", "O"]


def test_discontinuous_gold_predicted_whole():
    predicted = ["B-A1", "I-A1", "I-A1", "I-A1", "I-A1", "O"]
    assert counts(predicted, DISCONTINUOUS) == (0, 1, 1)
    assert span_counts(predicted, DISCONTINUOUS) == (0, 1, 2)


def test_discontinuous_gold_predicted_in_pieces():
    assert counts(DISCONTINUOUS, DISCONTINUOUS) == (1, 0, 0)  # one argument, not two spans
    assert span_counts(DISCONTINUOUS, DISCONTINUOUS) == (2, 0, 0)


def test_discontinuous_gold_one_piece_wrong():
    head_wrong = ["B-A1", "O", "B-V", "B-C-A1", "I-C-A1", "O"]  # same extent (0,4), head piece (0,0)
    assert counts(head_wrong, DISCONTINUOUS) == (0, 1, 1)
    assert span_counts(head_wrong, DISCONTINUOUS) == (1, 1, 1)  # the span F1 credits the right piece
    tail_wrong = ["B-A1", "I-A1", "B-V", "B-C-A1", "I-C-A1", "I-C-A1"]
    assert counts(tail_wrong, DISCONTINUOUS) == (0, 1, 1)


def test_predicted_split_of_a_continuous_argument():
    gold = ["B-A0", "I-A0", "I-A0", "B-V"]
    predicted = ["B-A0", "B-C-A0", "I-C-A0", "B-V"]
    assert counts(predicted, gold) == (0, 1, 1)
    assert span_counts(predicted, gold) == (0, 2, 1)


def test_orphan_continuation_is_an_argument_of_its_base_type():
    gold = ["B-C-A1", "I-C-A1", "B-V", "O"]
    assert [(a.type, a.pieces) for a in arguments(spans(gold))] == [("A1", [(0, 1)]), ("V", [(2, 2)])]
    assert counts(["B-A1", "I-A1", "B-V", "O"], gold) == (1, 0, 0)
    assert span_counts(["B-A1", "I-A1", "B-V", "O"], gold) == (0, 1, 1)
    # a later C-A1 continues the orphan
    two = ["B-C-A1", "O", "B-V", "B-C-A1"]
    assert [(a.type, a.pieces) for a in arguments(spans(two))] == [("A1", [(0, 0), (3, 3)]), ("V", [(2, 2)])]


def test_reference_argument_is_its_own_type():
    gold = ["B-A0", "B-R-A0", "B-V", "B-A1"]
    predicted = ["B-A0", "B-A0", "B-V", "B-A1"]
    metric = Conll05Score()
    metric.add(predicted, gold)
    assert metric.counts() == (2, 1, 1)
    assert metric.missed == {"R-A0": 1} and metric.excess == {"A0": 1}
    assert metric.compute()["f1-R-A0"] == 0.0


def test_adjacent_arguments():
    gold = ["B-A0", "I-A0", "B-A1", "I-A1", "B-V", "B-A0", "B-A0"]
    assert counts(gold, gold) == (4, 0, 0)
    merged = ["B-A0", "I-A0", "I-A0", "I-A0", "B-V", "B-A0", "I-A0"]
    assert counts(merged, gold) == (0, 2, 4)


def test_continuation_attaches_to_the_latest_argument_of_its_type():
    gold = ["B-A1", "B-V", "B-A1", "O", "B-C-A1"]
    args = arguments(spans(gold))
    assert [(a.type, a.pieces) for a in args] == [("A1", [(0, 0)]), ("V", [(1, 1)]), ("A1", [(2, 2), (4, 4)])]


def test_sentence_without_predicates_is_not_scored():
    metric = Conll05Score()
    batch = {"gold_tags": [["O", "O"], ["B-A0", "B-V"]], "predicate_indices": [None, 1]}
    metric.update([["B-A0", "I-A0"], ["B-A0", "B-V"]], batch)
    assert metric.counts() == (1, 0, 0) and metric.propositions == 1
    assert metric.compute()["f1"] == 1.0 and metric.compute()["perfect_props"] == 1.0


def test_v_is_excluded_and_empty_scores_are_zero():
    metric = Conll05Score()
    metric.add(["O", "O", "O"], ["O", "B-V", "O"])
    assert metric.counts() == (0, 0, 0)
    assert metric.compute()["f1"] == 0.0


def test_props_column():
    assert props_column(["B-A0", "I-A0", "B-V", "O", "B-C-A0"]) == ["(A0*", "*)", "(V*)", "*", "(C-A0*)"]


# --- agreement with srl-eval.pl -----------------------------------------------------------


def _find_wheel() -> Path | None:
    dirs = [Path(os.environ["ELMOC_WHEEL_CACHE"])] if os.environ.get("ELMOC_WHEEL_CACHE") else []
    dirs += [REPO / "resources" / "downloads" / ".cache", WHEEL_CACHE]
    for d in dirs:
        if (d / WHEEL).is_file():
            return d / WHEEL
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                        "--retries", "1", "--timeout", "30", "-d", str(WHEEL_CACHE), "allennlp==0.9.0"],
                       capture_output=True, timeout=300, check=True)
    except (subprocess.SubprocessError, OSError):
        return None
    return WHEEL_CACHE / WHEEL if (WHEEL_CACHE / WHEEL).is_file() else None


@pytest.fixture(scope="module")
def srl_eval(tmp_path_factory) -> Path:
    if shutil.which("perl") is None:
        pytest.skip("perl not installed (apt-get install perl)")
    wheel = _find_wheel()
    if wheel is None:
        pytest.skip(f"{WHEEL} not found and pip download failed")
    if hashlib.sha256(wheel.read_bytes()).hexdigest() != WHEEL_SHA256:
        pytest.skip(f"{wheel} does not have the pinned sha256")
    out = tmp_path_factory.mktemp("srl_eval") / "srl-eval.pl"
    with zipfile.ZipFile(wheel) as z:
        out.write_bytes(z.read("allennlp/tools/srl-eval.pl"))
    return out


def _corrupt(tags: list[str], rng: random.Random) -> list[str]:
    """Seeded errors of the kinds that separate the two scores (splits, merged pieces,
    orphans, relabels, boundaries, drops, spurious arguments, tag noise)."""
    args = [s for s in spans(tags) if s[0] != "V"]
    out = list(tags)

    def put(kind, first, last):
        for i in range(first, last + 1):
            out[i] = ("B-" if i == first else "I-") + kind

    for kind, first, last in args:
        roll = rng.random()
        if roll < 0.45:
            continue
        if roll < 0.6 and last > first:  # split X -> X + C-X
            cut = rng.randint(first, last - 1)
            put(kind, first, cut)
            put("C-" + kind, cut + 1, last)
        elif roll < 0.67:  # relabel (incl. R-X and an orphan C-X)
            put(rng.choice(["A0", "A1", "A2", "AM-TMP", "R-" + kind, "C-" + kind]), first, last)
        elif roll < 0.75:  # boundary
            put(kind, first, min(len(out) - 1, last + rng.choice([-1, 1])) if last > first else last)
        elif roll < 0.82:  # drop
            for i in range(first, last + 1):
                out[i] = "O"
        elif roll < 0.9 and last - first >= 2:  # two pieces around an O (a discontinuous prediction)
            put(kind, first, first)
            out[first + 1] = "O"
            put("C-" + kind, first + 2, last)
        else:  # tag noise: I- without B-
            out[first] = "I-" + kind
    if rng.random() < 0.15:
        free = [i for i, t in enumerate(out) if t == "O"]
        if free:
            i = rng.choice(free)
            out[i] = "B-" + rng.choice(["A1", "C-A1", "AM-LOC"])
    return out


HAND_CASES = [  # (gold, predicted), each one proposition of its own sentence
    (DISCONTINUOUS, ["B-A1", "I-A1", "I-A1", "I-A1", "I-A1", "O"]),
    (DISCONTINUOUS, DISCONTINUOUS),
    (DISCONTINUOUS, ["B-A1", "O", "B-V", "B-C-A1", "I-C-A1", "O"]),
    (["B-A0", "I-A0", "I-A0", "B-V"], ["B-A0", "B-C-A0", "I-C-A0", "B-V"]),
    (["B-C-A1", "I-C-A1", "B-V", "O"], ["B-A1", "I-A1", "B-V", "O"]),
    (["B-C-A1", "O", "B-V", "B-C-A1"], ["B-A1", "O", "B-V", "B-C-A1"]),
    (["B-A0", "B-R-A0", "B-V", "B-A1"], ["B-A0", "B-A0", "B-V", "B-A1"]),
    (["B-A0", "I-A0", "B-A1", "I-A1", "B-V", "B-A0", "B-A0"], ["B-A0", "I-A0", "I-A0", "I-A0", "B-V", "B-A0", "I-A0"]),
]


def _write_props(path: Path, sentences) -> None:
    """``sentences``: [(length, [(predicate index, tags), ...])] -> the script's props file."""
    lines = []
    for length, props in sentences:
        props = sorted(props)
        targets = ["-"] * length
        for index, _ in props:
            targets[index] = "verb"
        columns = [targets] + [props_column(tags) for _, tags in props]
        lines += [" ".join(col[i] for col in columns) for i in range(length)] + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _script_counts(output: str) -> dict[str, tuple[int, int, int, float]]:
    rows = {}
    for m in re.finditer(r"^\s*(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s*$", output, re.M):
        rows[m[1]] = (int(m[2]), int(m[3]), int(m[4]), float(m[5]))
    return rows


def test_agrees_with_srl_eval_pl(srl_eval, shared_data, tmp_path):
    """CoNLL-2012 fixtures (config/shared-data.yaml's SRL data and AllenNLP's conll_2012
    examples) with seeded corrupted predictions plus the hand-built cases: counts, F1
    and per-type counts equal the script's."""
    fixtures = [shared_data / "fixtures" / "allennlp" / "srl" / "nt_6401.gold_conll",
                shared_data / "fixtures" / "allennlp" / "conll_2012"]
    if not all(p.exists() for p in fixtures):
        pytest.skip("CoNLL-2012 fixtures absent from the shared data")
    rng = random.Random(7)
    gold_sentences, pred_sentences = {}, {}
    metric = Conll05Score()
    batch = {"gold_tags": [], "predicate_indices": []}
    predictions = []
    sentence, previous = 0, None
    for path in fixtures:
        for x in srl_instances(read_conll2012(path)):  # a sentence's predicates come one after another
            sentence += previous is not x.words
            previous = x.words
            key = sentence
            gold_sentences.setdefault(key, (len(x.words), []))
            pred_sentences.setdefault(key, (len(x.words), []))
            predicted = _corrupt(list(x.tags), rng)
            if x.predicate_index is not None:
                gold_sentences[key][1].append((x.predicate_index, list(x.tags)))
                pred_sentences[key][1].append((x.predicate_index, predicted))
            batch["gold_tags"].append(list(x.tags))
            batch["predicate_indices"].append(x.predicate_index)
            predictions.append(predicted)
    for n, (gold, predicted) in enumerate(HAND_CASES):
        index = gold.index("B-V")
        gold_sentences[("hand", n)] = (len(gold), [(index, gold)])
        pred_sentences[("hand", n)] = (len(gold), [(index, predicted)])
        batch["gold_tags"].append(gold)
        batch["predicate_indices"].append(index)
        predictions.append(predicted)
    metric.update(predictions, batch)
    assert any(not props for _, props in gold_sentences.values()), "expected a sentence without predicates"
    _write_props(tmp_path / "gold.props", gold_sentences.values())
    _write_props(tmp_path / "pred.props", pred_sentences.values())
    run = subprocess.run(["perl", str(srl_eval), str(tmp_path / "gold.props"), str(tmp_path / "pred.props")],
                         capture_output=True, text=True, check=True)
    rows = _script_counts(run.stdout)
    ours = metric.compute()
    correct, excess, missed = metric.counts()
    assert rows["Overall"][:3] == (correct, excess, missed), run.stdout
    assert rows["Overall"][3] == pytest.approx(100 * ours["f1"], abs=0.005)
    perfect = re.search(r"perfect props :\s*([\d.]+)", run.stdout)[1]
    assert float(perfect) == pytest.approx(100 * ours["perfect_props"], abs=0.005)
    assert excess > 50 and missed > 50 and correct > 100  # the corruptions did bite
    types = sorted(set(metric.correct) | set(metric.excess) | set(metric.missed))
    for kind in types:
        assert rows[kind][:3] == (metric.correct[kind], metric.excess[kind], metric.missed[kind]), kind
    span = SpanF1("gold_tags", ignore_types=("V",))
    span.update(predictions, batch)
    assert span.compute()["f1"] != pytest.approx(ours["f1"])  # the two scores do differ here
