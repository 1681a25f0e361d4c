"""CoNLL-2012 reader: hand-written files in the real format and the AllenNLP fixtures."""
from __future__ import annotations

from pathlib import Path

import pytest

from elmoc.tasks.conll2012 import (
    continuation_without_base,
    read_conll2012,
    read_conll2012_file,
    srl_instances,
)
from elmoc.errors import InputFileError

# Columns: doc part num word POS parse lemma frameset sense speaker NER srl... coref
TINY = """\
#begin document (nw/wsj/00/wsj_0001); part 002
nw/wsj/00/wsj_0001 2 0 John   NNP (TOP(S(NP*) -    -  - Speaker#1 (PERSON) (ARG0*)   *        (0)
nw/wsj/00/wsj_0001 2 1 said   VBD (VP*        say  01 - Speaker#1 *        (V*)      *        -
nw/wsj/00/wsj_0001 2 2 he     PRP (S(NP*)     -    -  - Speaker#1 *        (ARG1*    (ARG0*)  (0)
nw/wsj/00/wsj_0001 2 3 would  MD  (VP*        -    -  - Speaker#1 *        *         (ARGM-MOD*) -
nw/wsj/00/wsj_0001 2 4 leave  VB  (VP*))))    leave 01 - Speaker#1 *       *)        (V*)     -
nw/wsj/00/wsj_0001 2 5 .      .   *))         -    -  - Speaker#1 *        *         *        -

nw/wsj/00/wsj_0001 2 0 The    DT  (TOP(S(NP*  -    -  - Speaker#2 *        (1|(2
nw/wsj/00/wsj_0001 2 1 old    JJ  *           -    -  - Speaker#2 *        2)
nw/wsj/00/wsj_0001 2 2 man    NN  *)          -    -  - Speaker#2 *        1)
nw/wsj/00/wsj_0001 2 3 left   VBD (VP*)       -    -  - Speaker#2 *        -
nw/wsj/00/wsj_0001 2 4 him    PRP *))         -    -  - Speaker#2 *        (0)
#end document
#begin document (bc/cctv/00/cctv_0001); part 000
bc/cctv/00/cctv_0001 0 0 Says VBZ (TOP(S(VP* say 01 - A * (V*) (C-ARG1* -
bc/cctv/00/cctv_0001 0 1 who  WP  *          -   -  - A * (R-ARG0*) *) -
bc/cctv/00/cctv_0001 0 2 ?    .   *)))       -   -  - A * * (V*) -
#end document
"""


def write(tmp_path: Path, text: str, name: str = "tiny.gold_conll") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_documents_parts_genre_speakers(tmp_path):
    docs = read_conll2012_file(write(tmp_path, TINY))
    assert [d.doc_key for d in docs] == ["nw/wsj/00/wsj_0001_2", "bc/cctv/00/cctv_0001_0"]
    assert [d.genre for d in docs] == ["nw", "bc"]
    assert [len(d.sentences) for d in docs] == [2, 1]
    assert docs[0].words[:3] == ["John", "said", "he"]
    assert docs[0].speakers == ["Speaker#1"] * 6 + ["Speaker#2"] * 5
    assert docs[0].sentence_starts == [0, 6]
    assert docs[0].sentences[1].line == 9


def test_coref_clusters_with_nested_and_multi_items(tmp_path):
    doc = read_conll2012_file(write(tmp_path, TINY))[0]
    # cluster 0: John (0), he (2), him (6+4=10); cluster 1: "The old man" (6..8); cluster 2: "The old" (6..7)
    assert doc.clusters == [[(0, 0), (2, 2), (10, 10)], [(6, 8)], [(6, 7)]]
    assert doc.sentences[1].coref_spans == [(2, 0, 1), (1, 0, 2), (0, 4, 4)]


def test_back_to_back_coref_items(tmp_path):
    # "(1(2" opens two mentions on one token, "2)1)" closes both: same clusters as "(1|(2" / "2)|1)"
    text = TINY.replace("(1|(2", "(1(2").replace("Speaker#2 *        1)", "Speaker#2 *        2)1)")
    text = text.replace("Speaker#2 *        2)\n", "Speaker#2 *        -\n", 1)
    doc = read_conll2012_file(write(tmp_path, text))[0]
    assert doc.sentences[1].coref_spans == [(1, 0, 2), (2, 0, 2), (0, 4, 4)]
    doc = read_conll2012_file(write(tmp_path, TINY.replace("(1|(2", "(1(2"), "b.gold_conll"))[0]
    assert doc.clusters == [[(0, 0), (2, 2), (10, 10)], [(6, 8)], [(6, 7)]]
    doc = read_conll2012_file(write(tmp_path, TINY.replace("Speaker#2 *        (0)", "Speaker#2 *        (0)(3)"), "c.gold_conll"))[0]
    assert doc.clusters[-1] == [(10, 10)] and doc.clusters[0][-1] == (10, 10)


# The public OntoNotes 5.0 release: documents whose token lines carry part -1 under a
# "part 000" header (no predicates, no clusters), between ordinary documents.
MINUS_ONE = """\
#begin document (wb/sel/00/sel_0001); part 000
wb/sel/00/sel_0001 -1 0 Hello UH * - - - - * -
wb/sel/00/sel_0001 -1 1 world NN * - - - - * -

wb/sel/00/sel_0001 -1 0 Bye UH * - - - - * -
#end document
#begin document (pt/ot/01/ot_0101); part 000
pt/ot/01/ot_0101 -1 0 Amen UH * - - - - * -
#end document
"""


def test_part_minus_one_documents_among_ordinary_ones(tmp_path):
    path = write(tmp_path, TINY + MINUS_ONE + TINY.split("#end document\n")[1] + "#end document\n")
    docs = read_conll2012_file(path)
    assert [d.doc_key for d in docs] == ["nw/wsj/00/wsj_0001_2", "bc/cctv/00/cctv_0001_0",
                                         "wb/sel/00/sel_0001_0", "pt/ot/01/ot_0101_0", "bc/cctv/00/cctv_0001_0"]
    assert [len(d.sentences) for d in docs] == [2, 1, 2, 1, 1]
    assert docs[2].words == ["Hello", "world", "Bye"] and docs[2].clusters == [] and docs[3].clusters == []
    instances = list(srl_instances(docs))
    assert [i.predicate_index for i in instances] == [1, 4, None, 0, 2, None, None, None, 0, 2]
    # reading a directory does not stop at such a file
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", MINUS_ONE, "z_gold_conll")
    assert len(read_conll2012(tmp_path)) == 5 + 2


def test_srl_frames_become_bio_instances(tmp_path):
    instances = list(srl_instances(read_conll2012_file(write(tmp_path, TINY))))
    # sentence 1 has two predicates, sentence 2 none (one all-O instance), doc 2 two predicates
    assert [i.predicate_index for i in instances] == [1, 4, None, 0, 2]
    assert instances[0].tags == ["B-ARG0", "B-V", "B-ARG1", "I-ARG1", "I-ARG1", "O"]
    assert instances[1].tags == ["O", "O", "B-ARG0", "B-ARGM-MOD", "B-V", "O"]
    assert instances[2].tags == ["O"] * 5
    # reference and continuation arguments keep their own labels
    assert instances[3].tags == ["B-V", "B-R-ARG0", "O"]
    assert instances[4].tags == ["B-C-ARG1", "I-C-ARG1", "B-V"]
    assert continuation_without_base(instances[4].tags) == ["C-ARG1"]
    assert continuation_without_base(["B-ARG1", "O", "B-C-ARG1"]) == []


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * (V* * -", "still open"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * (V*) * 7)", "not open"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * (V*) * (x)", "malformed coreference"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * [V*] * -", "malformed cell"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * (V*) -", "columns"),
        ("nw/wsj/00/wsj_0001 2 1 said", "at least 12"),
        ("nw/wsj/00/wsj_0001 5 1 said VBD (VP* say 01 - Speaker#1 * (V*) * -", "part number"),
        ("nw/wsj/00/wsj_0001 -2 1 said VBD (VP* say 01 - Speaker#1 * (V*) * -", "part number"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * (V*) * (1(", "malformed coreference"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * (V*) * (1)7", "malformed coreference"),
        # issue 20 item 9: unbalanced brackets in the parse, NER and SRL columns
        ("nw/wsj/00/wsj_0001 2 1 said VBD *))) say 01 - Speaker#1 * (V*) * -", r"parse column 6: '\*\)\)\)' closes 1 more"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP(VP* say 01 - Speaker#1 * (V*) * -", "parse column 6: 1 bracket"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD VP* say 01 - Speaker#1 * (V*) * -", "parse column 6 has malformed cell"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP** say 01 - Speaker#1 * (V*) * -", "parse column 6 has malformed cell"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 (ORG* (V*) * -", "named-entity column 11: span 'ORG' is never closed"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 *) (V*) * -", "named-entity column 11 closes a span"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 (ORG (V*) * -", "named-entity column 11 has malformed cell"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * *) * -", "SRL column 12 closes a span that was never"),
        ("nw/wsj/00/wsj_0001 2 1 said VBD (VP* say 01 - Speaker#1 * (V*) (V*)) -", "SRL column 13 has malformed cell"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, bad_line, message):
    lines = TINY.splitlines()
    lines[2] = bad_line  # line 3 of the file: "said"
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(InputFileError, match=message) as info:
        read_conll2012_file(path)
    assert info.value.path == str(path)
    assert info.value.line is not None and 2 <= info.value.line <= 7  # inside the first sentence
    assert str(info.value).startswith(f"{path}:{info.value.line}: ") and "\n" not in str(info.value)


def test_parse_column_exemptions_as_allennlp(tmp_path):
    # no tree to check: a parse column of '-' only, or an 'XX' word/POS (AllenNLP builds no tree then)
    dashes = "".join(
        " ".join(row[:5] + ["-"] + row[6:]) + "\n" if len(row) > 5 else " ".join(row) + "\n"
        for row in (line.split() for line in TINY.splitlines())
    )
    assert len(read_conll2012_file(write(tmp_path, dashes, "dash.gold_conll"))) == 2
    broken = TINY.replace("would  MD  (VP*  ", "would  MD  (VP(NP*")
    with pytest.raises(InputFileError, match="parse column 6: 1 bracket"):
        read_conll2012_file(write(tmp_path, broken, "md.gold_conll"))
    xx = broken.replace("would  MD", "would  XX")
    assert len(read_conll2012_file(write(tmp_path, xx, "xx.gold_conll"))) == 2


def test_srl_column_without_predicate_is_kept_like_allennlp(shared_data, tmp_path, caplog):
    # issue 20 item 9: OntoNotes nw/p2.5_c2e_0034 has an SRL column with no (V*) span, which
    # refused the whole file.  A real sentence (AllenNLP's fixture) with the (V*) of "say" removed:
    real = (shared_data / "fixtures/allennlp/conll_2012/subdomain/example.gold_conll").read_text(encoding="utf-8")
    lines = real.splitlines()
    say = next(i for i, line in enumerate(lines) if line.split()[3:4] == ["say"])
    assert lines[say].split()[11] == "(V*)"
    lines[say] = lines[say].replace("(V*)", "  * ", 1)
    path = write(tmp_path, "\n".join(lines) + "\n", "p2.5_c2e_0034.gold_conll")
    with caplog.at_level("WARNING", logger="elmoc.tasks.conll2012"):
        docs = read_conll2012_file(path)
    original = read_conll2012_file(shared_data / "fixtures/allennlp/conll_2012/subdomain/example.gold_conll")
    assert [len(d.sentences) for d in docs] == [len(d.sentences) for d in original]
    frames = docs[0].sentences[0].srl_frames
    say_tags = original[0].sentences[0].srl_frames[0][1]
    assert say_tags[3] == "B-V"
    # the frame stays, with no predicate and its arguments as annotated (AllenNLP: all-zero
    # verb indicator, tags as read); the sentence's other frame ("was") is kept too
    assert frames[0] == (None, say_tags[:3] + ["O"] + say_tags[4:])
    assert frames[0][1] == ["B-ARG0", "I-ARG0", "I-ARG0", "O"] + ["B-ARG1"] + ["I-ARG1"] * 5 + ["O"]
    assert frames[1] == original[0].sentences[0].srl_frames[1] and frames[1][0] == 8
    instances = [i for i in srl_instances(docs) if i.sentence_index == 0 and i.doc_key == docs[0].doc_key]
    assert [(i.predicate_index, i.tags) for i in instances] == [(None, frames[0][1]), (8, frames[1][1])]
    assert len(list(srl_instances(docs))) == len(list(srl_instances(original)))
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}:{docs[0].sentences[0].line}: 1 SRL column(s) without a '(V*)' predicate span in this file, the "
        "first column 12 of the sentence starting here; kept as AllenNLP keeps them: no predicate, argument tags "
        "as annotated"]


def test_unclosed_coref_points_at_the_sentence(tmp_path):
    text = TINY.replace("(ARG1*    (ARG0*)  (0)", "(ARG1*    (ARG0*)  (0")
    with pytest.raises(InputFileError, match=r"cluster\(s\) \[0\] opened but not closed") as info:
        read_conll2012_file(write(tmp_path, text))
    assert info.value.line == 7


def test_document_structure_errors(tmp_path):
    with pytest.raises(InputFileError, match="no '#end document'"):
        read_conll2012_file(write(tmp_path, TINY.rsplit("#end document", 1)[0]))
    with pytest.raises(InputFileError, match="outside") as info:
        read_conll2012_file(write(tmp_path, "\n".join(TINY.splitlines()[1:]), "b.gold_conll"))
    assert info.value.line == 1
    with pytest.raises(InputFileError, match="'ARG1' is never closed") as info:
        read_conll2012_file(write(tmp_path, TINY.replace("Speaker#1 *       *)", "Speaker#1 *       * "), "d.gold_conll"))
    assert info.value.line == 7
    with pytest.raises(InputFileError, match="not found"):
        read_conll2012(tmp_path / "missing")


def test_allennlp_srl_fixture(shared_data):
    docs = read_conll2012(shared_data / "fixtures/allennlp/srl/nt_6401.gold_conll")
    assert len(docs) == 1 and docs[0].genre == "pt" and len(docs[0].sentences) == 37
    instances = list(srl_instances(docs))
    assert len(instances) == 82
    first = instances[0]
    assert first.words == ["Greetings", "from", "the", "Elder", "."]
    assert first.predicate_index is None and first.tags == ["O"] * 5
    love = instances[1]
    assert love.predicate_index == 10 and love.words[10] == "love"
    assert love.tags == ["O"] * 6 + ["B-ARG1", "I-ARG1", "B-ARG0", "B-ARGM-ADV", "B-V", "O"]
    # every predicate instance tags its own predicate as V
    assert all(i.tags[i.predicate_index] == "B-V" for i in instances if i.predicate_index is not None)


def test_allennlp_conll2012_directory_fixture(shared_data):
    docs = read_conll2012(shared_data / "fixtures/allennlp/conll_2012")
    assert [len(d.sentences) for d in docs] == [4, 1]
    assert docs[0].doc_key == "bn/cnn/01/cnn_0115_0"
    # the 12-column sentence (no SRL frame) with non-contiguous word numbers
    assert docs[0].sentences[2].words == ["Denise", "Dillon", "Headline", "News", "."]
    assert docs[0].sentences[2].srl_frames == []
    assert docs[0].sentences[0].coref_spans == [(1, 4, 6), (3, 4, 7)]


def test_allennlp_coref_fixture(shared_data):
    docs = read_conll2012(shared_data / "fixtures/allennlp/coref/coref.gold_conll")
    assert [d.doc_key for d in docs] == ["bc/cctv/00/cctv_0000_0", "bc/cctv/00/cctv_0000_3"]
    assert all(d.genre == "bc" for d in docs)
    # cluster 6 = Hong Kong, cluster 44 = the clever Hong Kong people / they (ordered by id)
    assert docs[1].clusters == [[(3, 4), (29, 30), (42, 43)], [(27, 31), (36, 36)]]
    words = docs[1].words
    assert words[3:5] == ["Hong", "Kong"] and words[29:31] == ["Hong", "Kong"]
    assert set(docs[0].speakers) == {"Speaker#1"}


# --- the releases' directory layout: <data>/<split>/data/<language>/annotations/... -------

OTHER_DOC = TINY.replace("nw/wsj/00/wsj_0001", "nw/wsj/00/wsj_0002")


def release_tree(root: Path, splits=("train", "development", "test", "conll-2012-test")) -> Path:
    """A tiny conll-formatted-ontonotes-5.0/data: per split an English gold file (one document
    per split, named after it), a Chinese gold file and an English *_auto_conll file."""
    data = root / "conll-formatted-ontonotes-5.0" / "data"
    for split in splits:
        english = data / split / "data" / "english" / "annotations" / "nw" / "wsj" / "00"
        chinese = data / split / "data" / "chinese" / "annotations" / "nw" / "xinhua" / "00"
        english.mkdir(parents=True)
        chinese.mkdir(parents=True)
        text = TINY.split("#begin document (bc")[0].replace("nw/wsj/00/wsj_0001", f"nw/wsj/00/{split}")
        write(english, text, f"{split}_gold_conll")
        (english / f"{split}.v4_gold_conll").write_text(text, encoding="utf-8")
        (english / f"{split}.v4_auto_conll").write_text(text, encoding="utf-8")
        (chinese / "chtb_0001.v4_gold_conll").write_text(OTHER_DOC, encoding="utf-8")
    return data


def test_release_layout_data_dir_and_split_names(tmp_path):
    from elmoc.tasks.srl import SrlTask
    from elmoc.tasks.coref import CorefTask

    data = release_tree(tmp_path)
    srl = SrlTask(data_dir=str(data))
    assert srl.paths == {"train": str(data / "train"), "dev": str(data / "development"), "test": str(data / "test")}
    train = srl.read("train")
    # English gold files only: the Chinese tree and the *_auto_conll copy are not read
    assert {x.doc_key for x in train} == {"nw/wsj/00/train_2"}
    assert len(train) == 2 * 3  # two gold files of the same document (gold_conll and v4_gold_conll), 3 instances each
    assert {x.doc_key for x in srl.read("test")} == {"nw/wsj/00/test_2"}
    coref = CorefTask(data_dir=str(data), splits={"test": "conll-2012-test"})
    assert {x.doc_key for x in coref.read("test")} == {"nw/wsj/00/conll-2012-test_2"}
    assert {x.doc_key for x in coref.read("dev")} == {"nw/wsj/00/development_2"}
    # language picks the subtree; a plain split directory given as `train` is walked the same way
    assert {d.doc_key for d in read_conll2012(data / "train", language="chinese")} == {"nw/wsj/00/wsj_0002_2", "bc/cctv/00/cctv_0001_0"}
    assert len(read_conll2012(data / "train", language=None)) == 4  # every *gold_conll file, both languages
    assert {x.doc_key for x in SrlTask(train=str(data / "train")).read("train")} == {"nw/wsj/00/train_2"}


def test_release_layout_errors_are_one_line(tmp_path):
    from elmoc.errors import ConfigError
    from elmoc.tasks.srl import SrlTask

    data = release_tree(tmp_path, splits=("train", "development"))
    with pytest.raises(InputFileError, match=r"not found \(.* holds: development, train\); .*splits") as info:
        SrlTask(data_dir=str(data)).read("test")
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="not both"):
        SrlTask(data_dir=str(data), train=str(data / "train"))
    with pytest.raises(ConfigError, match="unknown key"):
        SrlTask(data_dir=str(data), splits={"validation": "development"})
    with pytest.raises(InputFileError, match="no 'arabic' subdirectory .*chinese, english"):
        read_conll2012(data / "train", language="arabic")
    # a split directory holding only *_auto_conll files (the releases' predicted columns)
    auto = tmp_path / "auto" / "data" / "english" / "annotations"
    auto.mkdir(parents=True)
    (auto / "a.v4_auto_conll").write_text(TINY, encoding="utf-8")
    with pytest.raises(InputFileError, match=r"holds no \*gold_conll file \(only 1 \*_conll file") as info:
        read_conll2012(tmp_path / "auto")
    assert "\n" not in str(info.value)


def test_release_layout_with_the_allennlp_ontonotes_files(shared_data, tmp_path):
    """The real OntoNotes excerpts of AllenNLP's fixtures placed in the v12 layout."""
    import shutil

    from elmoc.tasks.srl import SrlTask

    data = tmp_path / "conll-formatted-ontonotes-5.0" / "data"
    sources = {"train": shared_data / "fixtures/allennlp/srl/nt_6401.gold_conll",
               "development": shared_data / "fixtures/allennlp/conll_2012/subdomain/example.gold_conll",
               "test": shared_data / "fixtures/allennlp/conll_2012/subdomain2/example.gold_conll"}
    for split, source in sources.items():
        target = data / split / "data" / "english" / "annotations" / "x" / source.name
        target.parent.mkdir(parents=True)
        shutil.copy(source, target)
    task = SrlTask(data_dir=str(data))
    assert len(task.read("train")) == 82  # as read from the file itself (test_allennlp_srl_fixture)
    assert len(task.read("dev")) == len(list(srl_instances(read_conll2012(sources["development"]))))
