"""IMDB user reviews in PEPPER's schema (Kim et al., 2024) -> user profiles, plus IMDb title metadata.

Input: `user_data_IMDB.json` (user id -> list of reviews with title, imdb_id, rating "8/10",
genres, director, cast, date, raw_review, abstract "[Like]...[Dislike]..."), or PEPPER's filtered
stage (`review_raw`, `review_abstract`, `plot`). Each user's reviews are sorted by rating, highest
first; the top floor(20%) become the targets and the rest the seen items (PEPPER's split; ties
broken by a shuffle seeded from --seed and the user id). Likes/dislikes come from the seen reviews'
abstracts only, so targets never leak into preferences. Optional IMDb `title.basics.tsv` files add
year, runtime, type and genres to the items (read with quoting off; `\\N` means empty).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from data_converters.base import ConversionOutput, ConversionReport, Converter, NeedRecord
from data_converters.readers import clean, header_of, iter_tsv_rows, read_json
from data_converters.splits import split_seen_targets
from usersimcrs.core.items import Item, ItemCollection, split_year
from usersimcrs.core.profile import InformationNeed, Preferences, SeenItem, UserProfile
from usersimcrs.errors import DataError

RATING_SCALE = (1.0, 10.0)
TITLE_BASICS = ["tconst", "primaryTitle"]
_SECTION = re.compile(r"\[(Like|Dislike)\]", re.I)


def parse_rating(raw: Any) -> float | None:
    """`"8/10"` -> 8.0; numbers pass through; missing or malformed -> None."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        return float(raw.split("/")[0].strip())
    except ValueError:
        return None


def parse_abstract(text: Any) -> tuple[list[str], list[str]]:
    """`"[Like]\\n- a\\n[Dislike]\\nNone"` -> (["a"], []); a section saying None is empty."""
    if not isinstance(text, str):
        return [], []
    likes: list[str] = []
    dislikes: list[str] = []
    parts = _SECTION.split(text)
    for label, body in zip(parts[1::2], parts[2::2]):
        lines = [ln.strip().lstrip("-*• ").strip() for ln in body.splitlines()]
        lines = [ln for ln in lines if ln and ln.lower() not in ("none", "none.")]
        (likes if label.lower() == "like" else dislikes).extend(lines)
    return likes, dislikes


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [str(value)]


def review_item(review: dict[str, Any]) -> Item:
    """A review's movie as an item (IMDb id when present, else the title)."""
    title = str(review.get("title") or "").strip()
    item_id = str(review.get("imdb_id") or title)
    attributes = {
        slot: values
        for slot, values in (
            ("genres", _as_list(review.get("genres"))),
            ("directors", _as_list(review.get("director"))),
            ("actors", _as_list(review.get("cast"))),
            ("plot", [str(review["plot"])] if review.get("plot") else []),
        )
        if values
    }
    return Item(id=item_id, title=title or item_id, year=split_year(title)[1], attributes=attributes)


class IMDBConverter(Converter):
    """PEPPER's user_data_IMDB.json (+ optional IMDb title.basics.tsv)."""

    name = "imdb"
    description = "PEPPER IMDB user reviews JSON, optional IMDb title.basics.tsv"

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        review_files = [p for p in inputs if p.suffix == ".json"]
        basics_files = [p for p in inputs if p.suffix != ".json"]
        items = ItemCollection()
        output = ConversionOutput(items=items)
        for path in review_files:
            data = read_json(path)
            if not isinstance(data, dict):
                raise DataError(f"{path}: expected an object of user id -> list of reviews")
            for user_id, reviews in data.items():
                self._user(str(user_id), reviews, items, output, report, f"{path}: user {user_id}")
        for path in basics_files:
            self._title_basics(path, items, report, only_known=bool(review_files))
        if not review_files and not basics_files:
            raise DataError("imdb: no input (expected user_data_IMDB.json and/or title.basics.tsv)")
        if review_files:
            report.counts_out["users"] = len(output.profiles)
            report.counts_out["reviews"] = sum(len(p.seen_items) + len(p.need.targets) for p in output.profiles)
        return output

    def _user(
        self,
        user_id: str,
        reviews: Any,
        items: ItemCollection,
        output: ConversionOutput,
        report: ConversionReport,
        where: str,
    ) -> None:
        report.count_in("users")
        given: dict[str, Any] = {}
        if isinstance(reviews, dict) and isinstance(reviews.get("seen"), list):
            given = reviews
            reviews = [*reviews.get("seen", []), *(reviews.get("target") or [])]
        if not isinstance(reviews, list):
            self.bad(report, where, "expected a list of reviews", user_id, {"users": 1})
            return
        report.count_in("reviews", len(reviews))
        valid = []
        for index, review in enumerate(reviews):
            if not isinstance(review, dict) or not (review.get("title") or review.get("imdb_id")):
                self.bad(report, f"{where}: review {index}", "needs a 'title' or 'imdb_id'", user_id, {"reviews": 1})
                continue
            if parse_rating(review.get("rating")) is None:
                report.warn("rating_missing", f"{where}: review {index}: rating {review.get('rating')!r}")
            valid.append(review)
        if not valid:
            report.drop(where, "user has no reviews", user_id, {"users": 1})
            return
        if given:
            target_ids = {id(r) for r in given.get("target") or []}
            seen = [r for r in valid if id(r) not in target_ids]
            targets = [r for r in valid if id(r) in target_ids]
        else:
            seen, targets = split_seen_targets(
                valid,
                lambda r: parse_rating(r.get("rating")),
                seed=self.options.seed,
                user_id=user_id,
                holdout=self.options.holdout,
            )
        if not targets:
            report.warn("user_without_targets", f"{where}: {len(valid)} review(s), none held out")
        likes: list[str] = []
        dislikes: list[str] = []
        for review in seen:
            like, dislike = parse_abstract(review.get("abstract", review.get("review_abstract")))
            likes += like
            dislikes += dislike
        if isinstance(given.get("likes"), list) or isinstance(given.get("dislikes"), list):
            likes = [str(x) for x in given.get("likes") or []]
            dislikes = [str(x) for x in given.get("dislikes") or []]
        seen_items = []
        preference_items = {}
        mine = {}  # this user's items as stored in the collection (the first review of an item adds it)
        for review in valid:
            item = review_item(review)
            if item.id not in items:
                items.add(item)
            mine[item.id] = items.get(item.id) or item
        for review in seen:
            item = mine[review_item(review).id]
            rating = parse_rating(review.get("rating"))
            seen_items.append(
                SeenItem(item=item.ref(), rating=rating, review=review.get("raw_review", review.get("review_raw")))
            )
            if rating is not None:
                preference_items[item.id] = _normalized(rating)
        need = InformationNeed(targets=[mine[review_item(r).id].ref() for r in targets])
        ratings = [parse_rating(r.get("rating")) for r in valid]
        known = [r for r in ratings if r is not None]
        narrative = given.get("persona") if isinstance(given.get("persona"), str) else None
        profile = UserProfile(
            user_id=user_id,
            need=need,
            preferences=Preferences(items=preference_items, likes=likes, dislikes=dislikes, narrative=narrative),
            seen_items=seen_items,
            metadata={
                "dataset": "imdb",
                "split": "given" if given else "top_rated_holdout",
                "average_rating": round(sum(known) / len(known), 3) if known else None,
                "seen/target": f"{len(seen)} / {len(targets)}",
                "split_seed": self.options.seed,
                "rating_scale": list(RATING_SCALE),
            },
        )
        output.profiles.append(profile)
        output.needs.append(NeedRecord(conversation_id=f"imdb:{user_id}", need=need))

    def _title_basics(self, path: Path, items: ItemCollection, report: ConversionReport, *, only_known: bool) -> None:
        if "tconst" not in header_of(path, "\t"):
            raise DataError(f"{path}: missing column 'tconst' (expected an IMDb title.basics.tsv)")
        for _line, row in iter_tsv_rows(path, TITLE_BASICS, lambda w, r: self.bad(report, w, r)):
            report.count_in("titles")
            tconst = row["tconst"].strip()
            item = items.get(tconst)
            if item is None and only_known:
                continue
            year = clean(row.get("startYear"))
            if item is None:
                title = row["primaryTitle"].strip()
                item = Item(id=tconst, title=f"{title} ({year})" if year and year.isdigit() else title)
                items.add(item)
            if year and year.isdigit():
                item.year = int(year)
            for column, slot, sep in (
                ("genres", "genres", ","),
                ("runtimeMinutes", "runtime_minutes", None),
                ("titleType", "title_type", None),
            ):
                value = clean(row.get(column))
                if value and not item.attributes.get(slot):
                    item.attributes[slot] = [v.strip() for v in value.split(sep)] if sep else [value]
            report.count_in("titles_matched")


def _normalized(rating: float) -> float:
    low, high = RATING_SCALE
    return max(-1.0, min(1.0, 2.0 * (rating - low) / (high - low) - 1.0))
