"""Every rubric file validates against the schema and carries the papers' counts, scales and roles."""

from __future__ import annotations

import pytest
import yaml

from usersimcrs.core.bundled import bundled_dir
from usersimcrs.errors import ConfigError
from usersimcrs.judges.rubrics import DebateRubric, Rubric, load_any, load_debate, load_rubric

RUBRIC_FILES = sorted(bundled_dir("rubrics").glob("*.yaml"))


def test_the_five_rubric_files_are_shipped():
    assert {p.stem for p in RUBRIC_FILES} >= {
        "quality",
        "core12",
        "debate_roles",
        "pepper",
        "persuasiveness",
        "crsarena_eval",
    }


@pytest.mark.parametrize("path", RUBRIC_FILES, ids=lambda p: p.stem)
def test_every_rubric_file_validates(path):
    rubric = load_any(path)
    assert isinstance(rubric, (Rubric, DebateRubric))
    assert rubric.name == path.stem
    if isinstance(rubric, Rubric):
        for criterion in rubric.criteria:
            # an anchor sentence for every level, each inside the scale
            assert all(level.anchor.strip() for level in criterion.levels)
            assert criterion.steps, f"{criterion.name} has no evaluation steps"


def test_quality_has_five_aspects_scored_1_to_5_with_an_anchor_per_level():
    rubric = load_rubric("quality")
    assert rubric.scale == (1, 5)
    assert [c.name for c in rubric.criteria] == [
        "recommendation_relevance",
        "communication_style",
        "fluency",
        "conversational_flow",
        "overall_satisfaction",
    ]
    for criterion in rubric.criteria:
        assert sorted(level.score for level in criterion.levels) == [1, 2, 3, 4, 5]


def test_core12_has_twelve_factors_in_four_dimensions_of_three():
    rubric = load_rubric("core12")
    assert rubric.scale == (0, 4)
    assert len(rubric.criteria) == 12
    by_dimension: dict[str, set[str]] = {}
    for criterion in rubric.criteria:
        by_dimension.setdefault(criterion.dimension, set()).add(criterion.name)
    assert by_dimension == {
        "dialogue_actions": {"coherence", "recoverability", "proactiveness"},
        "language_expression": {"grammatical_correctness", "naturalness", "appropriateness"},
        "recommended_items": {"effectiveness", "novelty", "diversity"},
        "response_content": {"semantic_relevance", "explainability", "groundedness"},
    }
    # inputs each factor needs: text only, the recommendation list, ground truth
    assert rubric.criterion("effectiveness").inputs == ["text", "recommendations", "ground_truth"]
    assert rubric.criterion("novelty").inputs == ["recommendations"]
    assert rubric.criterion("coherence").inputs == ["text"]
    assert "recommendations" in rubric.criterion("semantic_relevance").inputs
    # appropriateness takes 4 or 0 only; count standards run 4..0
    assert rubric.valid_scores(rubric.criterion("appropriateness")) == [0, 4]
    for name in ("coherence", "recoverability", "grammatical_correctness", "groundedness", "naturalness"):
        assert sorted(level.score for level in rubric.criterion(name).levels) == [0, 1, 2, 3, 4]


def test_debate_roles_are_cores_four_with_their_factor_sets():
    debate = load_debate()
    assert debate.scale == (0, 100)
    assert debate.max_rounds == 4
    assert {a.score for a in debate.anchors} == {0, 100}
    roles = {r.name: set(r.factors) for r in debate.roles}
    assert roles == {
        "common_user": {"effectiveness", "coherence", "recoverability"},
        "domain_expert": {"novelty", "diversity", "groundedness"},
        "linguist": {"appropriateness", "naturalness", "grammatical_correctness"},
        "hci_expert": {"semantic_relevance", "explainability", "proactiveness"},
    }
    # together the roles cover the twelve factors exactly once
    all_factors = [f for r in debate.roles for f in r.factors]
    assert sorted(all_factors) == sorted(c.name for c in load_rubric("core12").criteria)
    debate.check_factors(load_rubric(debate.factor_rubric))


def test_pepper_measures_and_personalization_needs_preferences():
    rubric = load_rubric("pepper")
    assert rubric.scale == (1, 5)
    assert [c.name for c in rubric.criteria] == ["proactiveness", "coherence", "personalization"]
    assert "preferences" in rubric.criterion("personalization").inputs
    assert "preferences" not in rubric.criterion("proactiveness").inputs


def test_persuasiveness_is_a_post_dialogue_rating():
    rubric = load_rubric("persuasiveness")
    assert rubric.scale == (0, 2)
    assert [c.name for c in rubric.criteria] == ["persuasiveness"]


def test_a_user_file_with_the_same_schema_replaces_a_builtin(tmp_path):
    data = yaml.safe_load((bundled_dir("rubrics") / "quality.yaml").read_text())
    data["criteria"] = data["criteria"][:1]
    data["criteria"][0]["title"] = "Relevance (house style)"
    path = tmp_path / "house.yaml"
    path.write_text(yaml.safe_dump(data))
    rubric = load_rubric(str(path))
    assert [c.title for c in rubric.criteria] == ["Relevance (house style)"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(scale=[5, 1]), "scale"),
        (lambda d: d["criteria"][0]["levels"].append({"score": 9, "anchor": "x"}), "outside the scale"),
        (lambda d: d["criteria"][0].update(colour="red"), "unknown key 'criteria.0.colour'"),
        (lambda d: d["criteria"][0].pop("definition"), "missing key 'criteria.0.definition'"),
        (lambda d: d["criteria"].append(dict(d["criteria"][0])), "duplicate"),
    ],
)
def test_a_broken_rubric_is_one_clear_error_naming_the_file(tmp_path, mutate, message):
    data = yaml.safe_load((bundled_dir("rubrics") / "quality.yaml").read_text())
    mutate(data)
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_rubric(str(path))
    assert str(path) in str(info.value) and message in str(info.value)


def test_debate_naming_an_unknown_factor_is_rejected(tmp_path):
    data = yaml.safe_load((bundled_dir("rubrics") / "debate_roles.yaml").read_text())
    data["roles"][0]["factors"] = ["charisma"]
    path = tmp_path / "roles.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="charisma"):
        load_debate(str(path)).check_factors(load_rubric("core12"))


def test_unknown_builtin_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match="core12"):
        load_rubric("nonexistent")


def test_crsarena_eval_has_its_turn_and_dialogue_aspects_with_their_scales():
    rubric = load_rubric("crsarena_eval")
    scales = {c.name: (c.level, rubric.valid_scores(c)) for c in rubric.criteria}
    assert scales == {
        "relevance": ("turn", [0, 1, 2, 3]),
        "interestingness": ("turn", [0, 1, 2]),
        "understanding": ("dialogue", [0, 1, 2]),
        "task_completion": ("dialogue", [0, 1, 2]),
        "interest_arousal": ("dialogue", [0, 1, 2]),
        "explanation": ("dialogue", [0, 1, 2]),
        "preference_elicitation": ("dialogue", [0, 1, 2]),
        "efficiency": ("dialogue", [0, 1]),
        "dialogue_overall": ("dialogue", [0, 1, 2, 3, 4]),
    }
    for criterion in rubric.criteria:  # one anchor per allowed score
        assert sorted(level.score for level in criterion.levels) == rubric.valid_scores(criterion)
