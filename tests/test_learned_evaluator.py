"""The learned evaluator: training on a slice (provenance, version check), prediction equal to the
fitted scikit-learn parts, run files in the official format, drift warnings, the judge, and scoring
CRSArena-Dial and simulated runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import SHARED_DATA
from tests.import_support import arena_exports, arena_votes
from usersimcrs.cli import main
from usersimcrs.core.crsarena_eval import BY_NAME, OFFICIAL, read_run_file
from usersimcrs.core.dialogue import Dialogue, DialogueAct, Utterance
from usersimcrs.core.run_folder import load_run
from usersimcrs.errors import UserError

RAW = SHARED_DATA / "raw" / "crsarena_eval"
ITEMS = SHARED_DATA / "items" / "movielens-25m-sample" / "movies_w_keywords.csv"
PER_CRS = 12
MORE = 3
"""Conversations per CRS in the `wider` corpus beyond the PER_CRS the model was trained on."""


def _slice(per_crs: int) -> list[dict]:
    """The first `per_crs` conversations of each CRS of the ReDial half."""
    records = json.loads((RAW / "crs_arena_eval_redial.json").read_text(encoding="utf-8"))
    taken: dict[str, int] = {}
    out = []
    for record in records:
        crs = record["conv_id"].split("_")[0]
        if taken.get(crs, 0) < per_crs:
            taken[crs] = taken.get(crs, 0) + 1
            out.append(record)
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """A converted slice of the ReDial half (12 conversations per CRS) and a model trained on it (with the
    MovieLens sample as its item catalogue)."""
    if not RAW.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    folder = tmp_path_factory.mktemp("learned")
    (folder / "slice.json").write_text(json.dumps(_slice(PER_CRS)))
    corpus = folder / "corpus"
    assert main(["convert", "crsarena-eval", "-i", str(folder / "slice.json"), "-o", str(corpus)]) == 0
    model = folder / "model.json"
    train = ["evaluator", "train", "--data", str(corpus), "--output", str(model), "--folds", "3", "--items", str(ITEMS)]
    assert main(train) == 0
    return corpus, model


@pytest.fixture(scope="module")
def simulated_run(tmp_path_factory):
    """Four conversations of the template agenda user with the built-in retrieval CRS."""
    import usersimcrs as us

    root = Path(__file__).resolve().parents[1]
    return us.simulate(
        crs="retrieval",
        simulator={"type": "agenda", "nlu": "rules", "nlg": "template"},
        items=str(root / "configs/data/tiny_movies.csv"),
        ratings=str(root / "configs/data/tiny_ratings.csv"),
        conversations=4,
        output=tmp_path_factory.mktemp("sim") / "sim",
        max_turns=4,
    )


@pytest.fixture(scope="module")
def wider(trained, tmp_path_factory) -> Path:
    """The slice plus MORE conversations per CRS the model never saw (15 per CRS, 75 in all)."""
    folder = tmp_path_factory.mktemp("wider")
    (folder / "wider.json").write_text(json.dumps(_slice(PER_CRS + MORE)))
    corpus = folder / "corpus"
    assert main(["convert", "crsarena-eval", "-i", str(folder / "wider.json"), "-o", str(corpus)]) == 0
    return corpus


def test_training_records_its_provenance(trained, capsys):
    import scipy
    import sklearn

    from usersimcrs.analysis.evaluator_fit import data_hash
    from usersimcrs.judges.learned.features import FEATURES_VERSION, load_cues
    from usersimcrs.judges.learned.model import load_model
    from usersimcrs.pipeline.sources import load_sources

    corpus, path = trained
    model = load_model(path)
    dialogues = [d for s in load_sources(corpus) for d in s.run.dialogues]
    assert model.training.data_sha256 == data_hash(dialogues)
    assert model.training.n_conversations == len(dialogues) == 5 * PER_CRS
    assert model.training.n_turns == sum(len(d.agent_turns) for d in dialogues)
    assert model.training.systems == [
        "barcor_redial",
        "chatgpt_redial",
        "crbcrs_redial",
        "kbrd_redial",
        "unicrs_redial",
    ]
    assert model.versions["scikit-learn"] == sklearn.__version__ and model.versions["scipy"] == scipy.__version__
    assert model.features_version == FEATURES_VERSION and model.cues_sha256 == load_cues().sha256
    # hyper-parameters chosen leaving one CRS out (5 CRSs: 5 folds, whatever --folds says)
    assert model.cv["grouping"] == "leave-one-CRS-out" and model.cv["folds"] == 5
    assert set(model.cv["aspects"]) == set(BY_NAME)
    for aspect, figures in model.cv["aspects"].items():
        assert -1 <= figures["pearson"] <= 1 and figures["n"] > 0, aspect
        assert -1 <= figures["within_pearson"] <= 1 and len(figures["within_pearson_ci"]) == 2, aspect
    # no silent self-evaluation: a salted hash of every training conversation's ID, not the IDs themselves
    ids = sorted(d.conversation_id for d in dialogues)
    assert model.training.conversation_hashes == sorted(model.training.hash_id(i) for i in ids)
    assert not set(ids) & set(model.training.conversation_hashes) and ids[0] not in path.read_text()
    assert model.training.corpus == ["slice.json"]  # the file the training folder was converted from
    assert model.cv["aspects"]["relevance"]["n"] == model.training.n_ratings["relevance"]
    assert {a.name for a in model.aspects} == set(BY_NAME)
    raw = json.loads(path.read_text())  # plain data: numbers, words and names only
    assert raw["format"] == "usersimcrs-learned-evaluator" and isinstance(raw["text_blocks"][0]["terms"][0], str)
    # the data hash moves with any rating
    dialogues[0].metadata["reference"]["dialogue_overall"] += 1
    assert data_hash(dialogues) != model.training.data_sha256


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("features_version", 999, "feature set v999"),
        ("cues_sha256", "0" * 64, "cues 000000000000"),
        ("format_version", 99, "model format v99"),
        ("format", "something-else", "not a learned-evaluator model"),
    ],
)
def test_a_model_for_other_versions_is_refused_in_one_line(trained, tmp_path, field, value, message, capsys):
    from usersimcrs.judges.learned.model import load_model

    corpus, path = trained
    data = json.loads(path.read_text())
    data[field] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(UserError, match=message):
        load_model(bad)
    assert main(["evaluator", "predict", str(corpus), "--model", str(bad), "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and message in err
    assert not (tmp_path / "x.json").exists()


def test_exported_trees_and_text_weights_predict_what_scikit_learn_predicts():
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.feature_extraction.text import TfidfVectorizer

    from usersimcrs.analysis.evaluator_fit import _export_trees, _identity
    from usersimcrs.judges.learned.model import TextBlock, TextVectors, _CompiledTrees

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6))
    x[:, 2] = rng.integers(0, 3, 300)  # ties at thresholds
    y = x[:, 0] * 2 + (x[:, 2] > 1) + rng.normal(0, 0.1, 300)
    gbm = GradientBoostingRegressor(n_estimators=30, max_depth=3, subsample=0.8, random_state=0).fit(x, y)
    ours = _CompiledTrees.of(_export_trees(gbm)).predict(x)
    assert np.allclose(ours, gbm.predict(x), atol=1e-9)

    docs = [["a", "b", "a b"], ["a", "a", "c"], [], ["b", "c", "d", "c d"], ["a", "d"]]
    vectorizer = TfidfVectorizer(analyzer=_identity, min_df=2, sublinear_tf=True, norm="l2").fit(docs)
    block = TextBlock(name="assistant", terms=vectorizer.get_feature_names_out().tolist(), idf=vectorizer.idf_.tolist())
    other = TextBlock(name="next_user", terms=["a", "zz"], idf=[1.0, 2.0])  # a second block shares the lookups
    text = TextVectors([block, other])
    unseen = [["a", "zz", "b"], ["c", "c", "c"]]
    for batch in (docs, unseen):
        assert np.allclose(text.matrix("assistant", batch).toarray(), vectorizer.transform(batch).toarray())
    assert text.matrix("next_user", unseen).toarray() == pytest.approx(np.array([[1, 2], [0, 0]]) / np.sqrt(5))


def test_predict_writes_the_official_run_file_format(trained, tmp_path, capsys):
    corpus, model = trained
    out = tmp_path / "pred.json"
    assert main(["evaluator", "predict", str(corpus), "--model", str(model), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert (
        "conversations/s reading and scoring" in printed and "per CPU-second" in printed and "load average" in printed
    )
    records = json.loads(out.read_text())
    dialogues = {d.conversation_id: d for d in (x for c in (corpus / "cells").iterdir() for x in load_run(c).dialogues)}
    assert len(records) == len(dialogues)
    for record in records:
        assert set(record) == {"conv_id", "turns", "dial_level_pred"}
        d = dialogues[record["conv_id"]]
        assert [t["turn_ind"] for t in record["turns"]] == [u.metadata["turn_ind"] for u in d.agent_turns]
        for turn in record["turns"]:
            assert set(turn) == {"turn_ind", "turn_level_pred"}
            assert set(turn["turn_level_pred"]) == {"relevance", "interestingness"}
            for name, value in turn["turn_level_pred"].items():
                assert BY_NAME[name].low <= value <= BY_NAME[name].high
        assert set(record["dial_level_pred"]) == set(OFFICIAL) - {"relevance", "interestingness"}
        for name, value in record["dial_level_pred"].items():
            assert BY_NAME[name].low <= value <= BY_NAME[name].high
    # ... and the official rule reads it back: meta-eval scores it (on its own training data: optimistic)
    assert main(["meta-eval", str(corpus), "--judgments", f"learned={out}", "--no-baselines", "--resamples", "0",
                 "--no-report", "-o", str(tmp_path / "me")]) == 0  # fmt: skip
    assert "| learned (computed) |" in capsys.readouterr().out
    everything = tmp_path / "all.json"
    main(["evaluator", "predict", str(corpus), "--model", str(model), "--output", str(everything), "--all-aspects"])
    assert "explanation" in read_run_file(everything)[0].dial_level_pred


def test_predict_warns_when_a_run_looks_unlike_the_training_data(trained, tmp_path, capsys):
    _, model = trained
    odd = [
        {
            "conv_id": f"odd_redial_{i}",
            "dialogue": [
                {"turn_ind": 0, "role": "USER", "utterance": "Guten Tag, ich suche einen Film " * 30},
                {"turn_ind": 1, "role": "ASST", "utterance": "Vielleicht gefällt Ihnen dieser Streifen sehr " * 40},
            ],
        }
        for i in range(20)
    ]
    (tmp_path / "odd.json").write_text(json.dumps(odd))
    run = tmp_path / "odd"
    assert main(["convert", "crsarena-eval", "-i", str(tmp_path / "odd.json"), "-o", str(run)]) == 0
    assert main(["evaluator", "predict", str(run), "--model", str(model), "-o", str(tmp_path / "p.json")]) == 0
    printed = capsys.readouterr().out
    assert "outside the model's vocabulary" in printed
    assert "assistant words values lie outside the training range" in printed


def test_the_learned_judge_writes_judgments_that_export_to_the_same_run_file(trained, tmp_path, capsys):
    import shutil

    corpus, model = trained
    cell = tmp_path / "cell"
    shutil.copytree(corpus / "cells" / "human__kbrd_redial__redial", cell)
    assert main(["judge", str(cell), "--judge", "learned", "--model", str(model), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    dialogues = load_run(cell).dialogues
    dialogue_aspects, turn_aspects = 7, 2  # the model's aspects: 7 per conversation, 2 per assistant turn
    turns = sum(len(d.agent_turns) for d in dialogues)
    assert summary["judged"] == len(dialogues) and summary["skipped_invalid"] == {}  # one-turn chats judged too
    assert summary["judgments_written"] == len(dialogues) * dialogue_aspects + turn_aspects * turns
    records = load_run(cell).judgments
    assert {r["model"] for r in records} == {"learned:" + hashlib.sha256(model.read_bytes()).hexdigest()[:12]}
    assert any(r["name"] == f"relevance@{dialogues[0].agent_turns[0].metadata['turn_ind']}" for r in records)
    assert all(r["usage"]["calls"] == 0 for r in records)
    assert main(["judge", str(cell), "--judge", "learned", "--model", str(model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["already_done"] == len(dialogues)
    exported, predicted = tmp_path / "exported.json", tmp_path / "predicted.json"
    assert main(["export-run", str(cell), "-o", str(exported)]) == 0
    assert main(["evaluator", "predict", str(cell), "--model", str(model), "-o", str(predicted)]) == 0
    a = {c.conv_id: c for c in read_run_file(exported)}
    b = {c.conv_id: c for c in read_run_file(predicted)}
    assert a.keys() == b.keys()
    for cid in a:
        assert a[cid].dial_level_pred == pytest.approx(b[cid].dial_level_pred)
        assert [t.turn_level_pred for t in a[cid].turns] == [pytest.approx(t.turn_level_pred) for t in b[cid].turns]
    assert main(["judge", str(cell), "--judge", "learned"]) == 2
    assert "--model MODEL" in capsys.readouterr().err


def test_scores_crsarena_dial_and_meta_eval_prints_the_ranking_against_bradley_terry(trained, tmp_path, capsys):
    _, model = trained
    raw = SHARED_DATA / "raw" / "crsarena_dial"
    corpus = tmp_path / "dial"
    assert main(["convert", "crsarena-dial", "-i", str(raw / "crs_arena_dial_open_first2_per_crs.json"),
                 str(raw / "votes_open_first25.csv"), "-o", str(corpus)]) == 0  # fmt: skip
    run_file = tmp_path / "dial_run.json"
    assert main(["evaluator", "predict", str(corpus), "--model", str(model), "-o", str(run_file)]) == 0
    assert len(read_run_file(run_file)) == 18
    assert "9 of the 18 conversations are in the model's training data" in capsys.readouterr().out
    capsys.readouterr()
    code = main(["meta-eval", str(corpus), "--scores", "learned:dialogue_overall", "--judgments",
                 f"learned={run_file}", "--resamples", "50", "--no-report", "-o", str(tmp_path / "me"),
                 "--model", str(model)])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    # the ReDial-half conversations are in CRSArena-Dial too: the model's own are found and left out
    assert "9 of 18 conversations are in the training data" in printed and "left out of every figure" in printed
    assert "on 9 of 9 conversations" in printed
    for baseline in ("conversation length", "assistant words per turn", "CRS identity"):
        assert (
            f"| {baseline} | conversation | auc |" in printed
            and f"| {baseline} | conversation | within_auc |" in printed
        )
    assert "human ranking (Bradley-Terry from 25 votes" in printed
    block = printed.split("system ranking by learned:dialogue_overall")[1]
    rows = [line for line in block.splitlines() if line.startswith("| ") and "_" in line.split("|")[1]]
    assert len(rows) == 9  # every CRS: mean score and rank beside BT strength and rank
    assert "| learned:dialogue_overall | system | kendall_tau_b |" in printed


def test_imported_exports_as_one_matrix_are_predicted_and_ranked_against_the_votes(trained, tmp_path, capsys):
    _, model = trained
    files = arena_exports(SHARED_DATA, tmp_path / "exports")
    matrix = tmp_path / "matrix"
    assert main(["import", *map(str, files), "--matrix", str(matrix)]) == 0
    run_file = tmp_path / "run.json"
    assert main(["evaluator", "predict", str(matrix), "--model", str(model), "-o", str(run_file)]) == 0
    source = [d["conversation ID"] for f in files for d in json.loads(f.read_text())]
    assert sorted(c.conv_id for c in read_run_file(run_file)) == sorted(source)
    capsys.readouterr()
    votes = arena_votes(SHARED_DATA)
    args = ["--scores", "learned:dialogue_overall", "--judgments", f"learned={run_file}", "--votes", str(votes)]
    assert main(["meta-eval", str(matrix), *args, "--resamples", "20", "--no-report", "-o", str(tmp_path / "me")]) == 0
    printed = capsys.readouterr().out
    assert "conversation level not checked" in printed
    block = printed.split("system ranking by learned:dialogue_overall")[1]
    rows = [line for line in block.splitlines() if line.startswith("| ") and "_" in line.split("|")[1]]
    assert len(rows) == 9


def test_scores_a_simulated_run_and_reads_the_agenda_users_acts(trained, simulated_run, tmp_path, capsys):
    from usersimcrs.judges.learned.features import TURN_FEATURES, conversation_features

    _, model = trained
    run = simulated_run
    out = tmp_path / "sim.json"
    assert main(["evaluator", "predict", str(run.path), "--model", str(model), "-o", str(out)]) == 0
    predicted = {c.conv_id: c for c in read_run_file(out)}
    for d in run.dialogues:
        assert [t.turn_ind for t in predicted[d.conversation_id].turns] == [
            i for i, u in enumerate(d.utterances) if u.participant == "AGENT"
        ]
    # a user act counts as a cue even when the words do not say it
    d = Dialogue(conversation_id="acts")
    d.add(Utterance(participant="USER", text="hm"))
    d.add(Utterance(participant="AGENT", text="Try Heat (1995)."))
    d.add(Utterance(participant="USER", text="hm", dialogue_acts=[DialogueAct(intent="NOTE.DISLIKE")]))
    row = dict(zip(TURN_FEATURES, conversation_features(d).hand[0]))
    assert row["n_reject"] == 1.0 and row["p_reject"] == 0.0 and row["a_titles"] == 1.0
    # a closing act is not acceptance or thanks: a user who gives up closes too
    left = Dialogue(conversation_id="left")
    left.add(Utterance(participant="USER", text="something funny?"))
    left.add(Utterance(participant="AGENT", text="Try Heat (1995)."))
    acts = [DialogueAct(intent="NOTE.NEUTRAL"), DialogueAct(intent="COMPLETE")]
    left.add(Utterance(participant="USER", text="Meh. Never mind, bye.", dialogue_acts=acts))
    row = dict(zip(TURN_FEATURES, conversation_features(left).hand[0]))
    assert (row["n_accept"], row["n_thanks"], row["n_give_up"]) == (0.0, 0.0, 1.0)


def test_worker_processes_give_the_same_run_file_in_the_same_order(trained, tmp_path):
    from usersimcrs.pipeline.evaluator import predict_evaluator

    corpus, model = trained
    one = predict_evaluator(corpus, model, tmp_path / "one.json", batch=16, workers=0, span_bytes=20_000)
    two = predict_evaluator(corpus, model, tmp_path / "two.json", batch=16, workers=2, span_bytes=20_000)
    assert one.workers == 0 and two.workers == 2 and one.conversations == two.conversations == 5 * PER_CRS
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()
    assert two.cpu_seconds > 0 and one.warnings == two.warnings


def test_the_lean_read_path_predicts_what_the_full_dialogues_predict(trained, tmp_path):
    """`evaluator predict` reads only the text fields of each stored line (RunFolder.dialogue_texts);
    its run file equals the predictions for the fully validated Dialogue models, value for value (in
    batches of other sizes, the matrix products may differ in the last bit)."""
    from usersimcrs.judges.learned.model import Evaluator
    from usersimcrs.pipeline.evaluator import predict_evaluator
    from usersimcrs.pipeline.sources import load_sources

    corpus, model = trained
    predict_evaluator(corpus, model, tmp_path / "lean.json", all_aspects=True, workers=0)
    lean = {c.conv_id: c for c in read_run_file(tmp_path / "lean.json")}
    evaluator = Evaluator.load(model)
    full = [c for s in load_sources(corpus) for c in evaluator.predict(s.run.dialogues)]  # a batch per run folder
    assert len(full) == len(lean) == 5 * PER_CRS
    for conversation in full:
        mine = lean[conversation.conv_id]
        assert mine.dial_level_pred == conversation.dial_level_pred  # exact: the same floats
        assert [(t.turn_ind, t.turn_level_pred) for t in mine.turns] == [
            (t.turn_ind, t.turn_level_pred) for t in conversation.turns
        ]
    predict_evaluator(corpus, model, tmp_path / "spans.json", all_aspects=True, batch=7, span_bytes=30_000, workers=0)
    for conversation in read_run_file(tmp_path / "spans.json"):
        assert conversation.dial_level_pred == pytest.approx(lean[conversation.conv_id].dial_level_pred, abs=1e-12)


def test_run_folder_reads_spans_of_dialogue_text(tmp_path):
    """Spans cover the dialogue file line by line; the text subset equals the full Dialogue's; a line
    of another type of field falls back to full validation; a torn last line is ignored; a bad line
    stops with a DataError naming the file."""
    from usersimcrs.core.dialogue_text import dialogue_text
    from usersimcrs.core.run_folder import RunFolder
    from usersimcrs.errors import DataError

    folder = RunFolder(tmp_path / "run")
    dialogues = []
    for i in range(30):
        d = Dialogue(conversation_id=f"c{i}", status="ok" if i % 7 else "failed")
        d.add(
            Utterance(participant="USER", text=f"a comedy please {i}", dialogue_acts=[DialogueAct(intent="DISCLOSE")])
        )
        d.add(Utterance(participant="AGENT", text="Try Heat (1995).", metadata={"turn_ind": 5}))
        dialogues.append(d)
    folder.write_dialogues(dialogues)
    spans = folder.dialogue_spans(4)
    assert len(spans) == 4 and spans[0][0] == 0 and spans[-1][1] == folder.dialogues_path.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    read = [t for span in spans for t in folder.dialogue_texts(span)]
    assert read == [dialogue_text(d) for d in dialogues] == list(folder.dialogue_texts())
    assert read[0].utterances[1].turn_ind == 5 and read[0].utterances[0].turn_ind is None
    assert [t.status for t in read].count("failed") == 5
    assert folder.dialogue_spans(1000)[-1][1] == spans[-1][1] and RunFolder(tmp_path / "none").dialogue_spans(3) == []
    path = folder.dialogues_path
    lines = path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["utterances"][1]["metadata"]["turn_ind"] = "5"  # not an int: read through the full model
    path.write_bytes(json.dumps(record).encode() + b"\n" + b"".join(lines[1:]) + b'{"conversation_id": "torn", "utt')
    texts = list(folder.dialogue_texts())
    assert len(texts) == 30 and texts[0].utterances[1].turn_ind == "5"  # the torn last line is ignored
    path.write_bytes(lines[0] + b"{not json\n" + b"".join(lines[1:]))
    with pytest.raises(DataError, match="dialogues.jsonl: byte"):
        list(folder.dialogue_texts())
    path.write_bytes(b'{"conversation_id": "x", "utterances": [{"participant": "ROBOT", "text": "hi"}]}\n')
    with pytest.raises(DataError, match="conversation x"):
        list(folder.dialogue_texts())


def test_training_without_ratings_or_with_too_few_conversations_is_one_line(tmp_path, capsys):
    unrated = [
        {
            "conv_id": f"kbrd_redial_{i}",
            "dialogue": [
                {"turn_ind": 0, "role": "USER", "utterance": "a comedy please"},
                {"turn_ind": 1, "role": "ASST", "utterance": "Try Airplane! (1980)"},
            ],
        }
        for i in range(25)
    ]
    for name, records in (("unrated", unrated), ("few", unrated[:5])):
        (tmp_path / f"{name}.json").write_text(json.dumps(records))
        assert main(["convert", "crsarena-eval", "-i", str(tmp_path / f"{name}.json"), "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["evaluator", "train", "--data", str(tmp_path / "unrated"), "-o", str(tmp_path / "m.json")]) == 2
    assert "no CRSArena-Eval ratings" in capsys.readouterr().err
    assert main(["evaluator", "train", "--data", str(tmp_path / "few"), "-o", str(tmp_path / "m.json")]) == 2
    assert "training needs 20" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_predict_and_judge_say_how_many_conversations_the_model_was_trained_on(trained, wider, tmp_path, capsys):
    import shutil

    _, model = trained
    capsys.readouterr()
    assert main(["evaluator", "predict", str(wider), "--model", str(model), "-o", str(tmp_path / "p.json")]) == 0
    printed = capsys.readouterr().out
    total = 5 * (PER_CRS + MORE)
    assert f"{5 * PER_CRS} of the {total} conversations are in the model's training data" in printed
    assert "in-sample" in printed
    cell = tmp_path / "cell"
    shutil.copytree(wider / "cells" / "human__kbrd_redial__redial", cell)
    assert main(["judge", str(cell), "--judge", "learned", "--model", str(model)]) == 0
    assert (
        f"{PER_CRS} of the {PER_CRS + MORE} conversations are in the model's training data" in capsys.readouterr().out
    )


def test_meta_eval_leaves_the_training_conversations_out_unless_asked(trained, wider, tmp_path, capsys):
    _, model = trained
    run_file = tmp_path / "p.json"
    assert main(["evaluator", "predict", str(wider), "--model", str(model), "-o", str(run_file)]) == 0
    capsys.readouterr()
    base = ["meta-eval", str(wider), "--judgments", f"learned={run_file}", "--resamples", "20", "--no-report"]
    assert main([*base, "--model", str(model), "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert f"{5 * PER_CRS} of {5 * (PER_CRS + MORE)} conversations are in the training data" in printed
    assert "left out of every figure" in printed
    table = pd.read_csv(tmp_path / "out" / "meta_eval.csv")
    pooled = table[(table["statistic"] == "pearson") & (table["source"] != "published")]
    overall = pooled[pooled["aspect"] == "dialogue_overall"].set_index("evaluator")
    assert overall.loc["learned", "n"] == 5 * MORE  # only the conversations the model never saw
    assert overall.loc["assistant utterance length", "n"] == 5 * MORE  # every evaluator on the same ones
    # the three baselines beside the evaluator, and the within-CRS figure of each (none for CRS identity)
    assert {"conversation length", "assistant utterance length", "CRS identity"} <= set(overall.index)
    within = table[(table["statistic"] == "within_pearson") & (table["aspect"] == "dialogue_overall")]
    within = within.set_index("evaluator")
    assert np.isfinite(within.loc["learned", "value"]) and np.isnan(within.loc["CRS identity", "value"])
    assert main([*base, "--model", str(model), "--include-training", "-o", str(tmp_path / "all")]) == 0
    assert "INCLUDED (--include-training)" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "all" / "meta_eval.csv")
    row = table[(table["evaluator"] == "learned") & (table["statistic"] == "pearson")]
    assert row.set_index("aspect").loc["dialogue_overall", "n"] == 5 * (PER_CRS + MORE)


def test_the_crs_identity_baseline_is_the_mean_of_the_crs_other_conversations():
    from usersimcrs.analysis.aspect_tables import GOLD_COLUMNS, identity_predictions

    gold = pd.DataFrame(
        [
            ("a1", -1, "dialogue_overall", 4.0, "A", "g"),
            ("a2", -1, "dialogue_overall", 2.0, "A", "g"),
            ("a3", -1, "dialogue_overall", 0.0, "A", "g"),
            ("b1", -1, "dialogue_overall", 1.0, "B", "g"),  # alone in its CRS: no prediction
            ("a1", 1, "relevance", 2.0, "A", "g"),
            ("a1", 3, "relevance", 0.0, "A", "g"),
            ("a2", 1, "relevance", 1.0, "A", "g"),
        ],
        columns=GOLD_COLUMNS,
    )
    pred = identity_predictions(gold).set_index(["conversation_id", "turn_ind", "aspect"])["pred"]
    assert pred[("a1", -1, "dialogue_overall")] == 1.0 and pred[("a3", -1, "dialogue_overall")] == 3.0
    assert ("b1", -1, "dialogue_overall") not in pred.index
    assert pred[("a1", 1, "relevance")] == pred[("a1", 3, "relevance")] == 1.0  # the other conversation's turns
    assert pred[("a2", 1, "relevance")] == 1.0  # mean of a1's two turns


def test_recommendations_are_compared_with_the_requested_genre_through_the_catalogue(tmp_path):
    from usersimcrs.judges.learned.features import TURN_FEATURES, Catalogue, conversation_features

    items = tmp_path / "items.csv"
    items.write_text(
        'movieId,title,genres,keywords\n1,Airplane! (1980),Comedy,spoof|parody\n2,"Conjuring, The (2013)",Horror,'
        "ghosts|haunted house\n3,Shaun of the Dead (2004),Comedy|Horror,zombies\n"
    )
    catalogue = Catalogue.load(items)

    def row(reply: str, request: str = "I want a funny movie, a comedy") -> dict[str, float]:
        d = Dialogue(conversation_id="c")
        d.add(Utterance(participant="USER", text=request))
        d.add(Utterance(participant="AGENT", text=reply))
        return dict(zip(TURN_FEATURES, conversation_features(d, catalogue=catalogue).hand[0]))

    assert row("Have you seen Airplane! (1980)?")["a_genre_match"] == 1.0
    off = row("Have you seen The Conjuring (2013)?")
    assert off["a_genre_match"] == 0.0 and off["a_genre_miss"] == 1.0 and off["a_resolved_share"] == 1.0
    listed = row("Here you go:\n1. Shaun of the Dead\n2. Airplane!")  # list lines without years resolve too
    assert listed["a_genre_match"] == 1.0 and listed["a_titles"] == 2.0
    assert row("Have you seen Shaun of the Dead (2004)?", "any zombies film?")["a_keyword_match"] == 1.0
    assert row("Have you seen ?")["a_broken"] == 1.0 and row("How about Airplane! (1980)?")["a_broken"] == 0.0
    d = Dialogue(conversation_id="c")
    d.add(Utterance(participant="USER", text="a comedy"))
    d.add(Utterance(participant="AGENT", text="Have you seen Airplane! (1980)?"))
    assert dict(zip(TURN_FEATURES, conversation_features(d).hand[0]))["a_genre_match"] == 0.0  # no catalogue


def test_catalogue_items_and_undated_list_titles_are_counted_per_reply_and_per_conversation(tmp_path):
    from usersimcrs.judges.learned.features import EXTRA_FEATURES, TURN_FEATURES, Catalogue, conversation_features

    items = tmp_path / "items.csv"
    items.write_text(
        "movieId,title,genres,keywords\n1,Airplane! (1980),Comedy,spoof\n2,Heat (1995),Crime,heist\n"
        "3,Alien (1979),Horror|Sci-Fi,space\n"
    )
    d = Dialogue(conversation_id="c")
    d.add(Utterance(participant="USER", text="any good movies?"))
    d.add(Utterance(participant="AGENT", text="I would recommend the following items:\n1: Heat (1995)\n2: Alien"))
    d.add(Utterance(participant="USER", text="more please"))
    d.add(
        Utterance(participant="AGENT", text="I would recommend the following items:\n1  Alien\n2  Airplane!\n3  Nope")
    )
    f = conversation_features(d, catalogue=Catalogue.load(items))
    first, second = (dict(zip(TURN_FEATURES, row)) for row in f.hand)
    assert first["a_items_found"] == pytest.approx(np.log1p(2)) and first["a_new_items_found"] == first["a_items_found"]
    assert second["a_items_found"] == pytest.approx(np.log1p(2))  # Alien and Airplane! ("Nope" is not an item)
    assert second["a_new_items_found"] == pytest.approx(np.log1p(1))  # Alien was recommended before
    # a list line without a year names a title: the second reply repeats one of its three, and brings two new
    assert second["a_repeats_titles"] == pytest.approx(1 / 3) and second["a_new_titles"] == pytest.approx(np.log1p(2))
    extra = dict(zip(EXTRA_FEATURES, f.extra))
    assert extra["items_found_log"] == pytest.approx(np.log1p(3)) and extra["items_found_per_turn"] == 1.5
    assert extra["distinct_titles_log"] == pytest.approx(np.log1p(4))  # heat, alien, airplane, nope
    bare = conversation_features(d)  # without a catalogue: no items, the titles still count
    items_columns = [TURN_FEATURES.index("a_items_found"), TURN_FEATURES.index("a_new_items_found")]
    assert dict(zip(EXTRA_FEATURES, bare.extra))["items_found_log"] == 0.0 and not bare.hand[:, items_columns].any()


def test_cross_validation_scores_the_held_out_crs_with_the_catalogue(trained):
    """Each fold's model scores its held-out conversations with the item catalogue it was trained with
    (before, the held-out conversations were scored without it: their catalogue features were 0)."""
    from usersimcrs.analysis.evaluator_fit import cross_validate, fit
    from usersimcrs.judges.learned.model import Evaluator
    from usersimcrs.pipeline.evaluator import _training_set

    corpus, _ = trained
    data = _training_set(corpus, ITEMS)
    two = np.flatnonzero(np.isin(data.systems, ["barcor_redial", "chatgpt_redial"]))
    data = data.subset(two)
    held_out = np.flatnonzero(np.asarray(data.systems) == "barcor_redial")
    predicted = {p.conv_id: p.dial_level_pred for p in cross_validate(data, folds=3, by="system")}
    model = fit(data.subset(np.setdiff1d(np.arange(len(data.systems)), held_out)), folds=3)
    expected = Evaluator(model, catalogue=data.catalogue).predict([data.dialogues[i] for i in held_out])
    assert {p.conv_id: p.dial_level_pred for p in expected} == {p.conv_id: predicted[p.conv_id] for p in expected}
    blind = Evaluator(model).predict([data.dialogues[i] for i in held_out])  # the catalogue features matter here
    assert [p.dial_level_pred for p in blind] != [p.dial_level_pred for p in expected]


def test_a_model_whose_catalogue_is_missing_stops_in_one_line(trained, tmp_path, capsys):
    import shutil

    corpus, path = trained
    data = json.loads(path.read_text())
    data["catalogue"]["path"] = str(tmp_path / "gone.csv")
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(data))
    out = tmp_path / "x.json"
    assert main(["evaluator", "predict", str(corpus), "--model", str(moved), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "gone.csv" in err and "--items" in err and not out.exists()
    assert (
        main(["evaluator", "predict", str(corpus), "--model", str(moved), "-o", str(out), "--items", str(ITEMS)]) == 0
    )
    cell = tmp_path / "cell"
    shutil.copytree(corpus / "cells" / "human__unicrs_redial__redial", cell)
    capsys.readouterr()
    assert main(["judge", str(cell), "--judge", "learned", "--model", str(moved)]) == 2
    assert "gone.csv" in capsys.readouterr().err
    assert main(["judge", str(cell), "--judge", "learned", "--model", str(moved), "--items", str(ITEMS)]) == 0


def test_cv_leads_with_leave_one_crs_out_and_shows_the_baselines(trained, tmp_path, capsys):
    corpus, _ = trained
    out = tmp_path / "cv"
    command = ["evaluator", "cv", "--data", str(corpus), "-o", str(out), "--folds", "2", "--resamples", "30"]
    assert main(command) == 0
    printed = capsys.readouterr().out
    rows = [line.split(" |")[0] for line in printed.splitlines() if line.startswith("| learned")]
    assert rows[0] == "| learned (leave-one-CRS-out) (computed)"  # the grouped figure first, in every table
    assert rows[1] == "| learned (2-fold CV, CRSs shared with training) (computed)"
    for baseline in ("conversation length", "assistant utterance length", "CRS identity"):
        assert f"| {baseline} (baseline) |" in printed
    assert "within-CRS Pearson r" in printed and "ranks systems, not conversations" in printed
    table = pd.read_csv(out / "meta_eval.csv")
    assert set(table["statistic"]) >= {"pearson", "within_pearson"} and table["ci_low"].notna().any()


def test_the_report_shows_the_predicted_overall_beside_success(trained, simulated_run):
    from usersimcrs.pipeline.report import report

    _, model = trained
    page = report(simulated_run.path, learned_model=model).read_text(encoding="utf-8")
    assert "Learned evaluator" in page and "predicted dialogue_overall (0-4)" in page
    assert "within-CRS r" in page and "leave-one-CRS-out" in page  # its agreement, never a bare number
    section = page.split("Learned evaluator</h2>")[1].split("<h2")[0]
    assert "(n=4)" in section and "retrieval" in section


def test_the_report_uses_the_docs_model_path_when_it_is_there_and_says_which_file(
    trained, simulated_run, tmp_path, monkeypatch, capsys
):
    import shutil

    _, model = trained
    monkeypatch.chdir(tmp_path)
    run = str(simulated_run.path)
    assert main(["report", run]) == 0  # no model at the docs' path: no section, no line about it
    assert "learned evaluator" not in capsys.readouterr().out
    assert "Learned evaluator</h2>" not in (simulated_run.path / "report.html").read_text(encoding="utf-8")
    (tmp_path / "models").mkdir()
    shutil.copy(model, tmp_path / "models" / "learned.json")
    assert main(["report", run]) == 0
    printed = capsys.readouterr().out
    assert "learned evaluator: models/learned.json (the docs' model path), trained " in printed
    page = (simulated_run.path / "report.html").read_text(encoding="utf-8")
    assert "Learned evaluator</h2>" in page and "Model models/learned.json (trained " in page
    assert main(["report", run, "--no-model"]) == 0
    assert "Learned evaluator</h2>" not in (simulated_run.path / "report.html").read_text(encoding="utf-8")
    stale = json.loads(model.read_text())
    stale["features_version"] -= 1  # a model of an older usersimcrs is named and left out, never used
    (tmp_path / "models" / "learned.json").write_text(json.dumps(stale))
    capsys.readouterr()
    assert main(["report", run]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert "models/learned.json" in line and "retrain" in line and "leaves it out" in line
    assert "Learned evaluator</h2>" not in (simulated_run.path / "report.html").read_text(encoding="utf-8")


def test_the_matrix_report_shows_every_crs_and_counts_the_training_conversations(trained, wider):
    from usersimcrs.pipeline.report import report

    _, model = trained
    page = report(wider, learned_model=model).read_text(encoding="utf-8")
    section = page.split("Learned evaluator</h2>")[1].split("<h2")[0]
    for crs in ("barcor_redial", "chatgpt_redial", "crbcrs_redial", "kbrd_redial", "unicrs_redial"):
        assert crs in section
    assert f"{5 * PER_CRS} of these conversations are in the model" in section and "in-sample" in section
    assert "not measured (n=0)" in section  # human conversations carry no acts: success is not measured, never 0
