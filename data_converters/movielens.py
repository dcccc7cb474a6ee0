"""MovieLens (Harper & Konstan, 2015): movies + ratings -> item collection, ratings and user profiles.

Items: `movieId,title,genres[,keywords]`; titles with a trailing article ("American President,
The (1995)") are turned into display form ("The American President (1995)") so they match the
titles of the dialogue datasets, the original title and any bracketed alternative titles are kept
as attributes, and "(no genres listed)" means no genres. Ratings (`userId,movieId,rating,timestamp`)
are copied; each rater becomes a profile whose top-rated 20% are held out as targets (same split
as IMDB, seeded).
"""

from __future__ import annotations

from pathlib import Path

from data_converters.base import ConversionOutput, ConversionReport, Converter, NeedRecord, RatingRow
from data_converters.metadata import read_movielens_items
from data_converters.readers import header_of, iter_csv_rows
from data_converters.splits import split_seen_targets
from usersimcrs.core.dialogue import ItemRef
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.profile import InformationNeed, Preferences, Ratings, SeenItem, UserProfile
from usersimcrs.errors import DataError

RATING_COLUMNS = ["userId", "movieId", "rating"]
MAX_PROFILE_USERS = 20_000  # beyond this, profiles.jsonl would dwarf the ratings; generate them at run time


class MovieLensConverter(Converter):
    """MovieLens movies.csv (+ keywords) and ratings.csv."""

    name = "movielens"
    description = "MovieLens movies.csv (movieId,title,genres[,keywords]) and ratings.csv"

    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        items = ItemCollection()
        output = ConversionOutput(items=items)
        rating_files = []
        for path in inputs:
            header = header_of(path)
            if "userId" in header:
                rating_files.append(path)
            elif "title" in header:
                before = len(items)
                for item in read_movielens_items(path, self.bad_counted(report, "items"), report):
                    items.add(item)
                report.count_in("items", len(items) - before)
            else:
                raise DataError(
                    f"{path}: not a MovieLens file (expected movieId,title,genres or userId,movieId,rating)"
                )
        for path in rating_files:
            self._ratings(path, items, output, report)
        users = len({row.user_id for row in output.ratings})
        if users > MAX_PROFILE_USERS:
            report.warn(
                "profiles_skipped",
                f"{users} users: no profiles.jsonl (over {MAX_PROFILE_USERS}); use 'profiles: {{source: generate}}' with ratings.csv",
            )
        else:
            self._profiles(output, items)
        return output

    def _ratings(self, path: Path, items: ItemCollection, output: ConversionOutput, report: ConversionReport) -> None:
        unknown = 0
        for line, row in iter_csv_rows(path, RATING_COLUMNS, self.bad_counted(report, "ratings")):
            report.count_in("ratings")
            try:
                rating = float(row["rating"])
            except ValueError:
                self.bad(
                    report, f"{path}:{line}: column 'rating'", f"not a number: {row['rating']!r}", counts={"ratings": 1}
                )
                continue
            item_id = row["movieId"].strip()
            if items and item_id not in items:
                unknown += 1
            output.ratings.append(
                RatingRow(row["userId"].strip(), item_id, rating, (row.get("timestamp") or "").strip())
            )
        if unknown:
            report.warn(
                "ratings_of_unknown_items", f"{path}: {unknown} rating(s) of movies not in the item files (kept)"
            )

    def _profiles(self, output: ConversionOutput, items: ItemCollection) -> None:
        ratings = Ratings(scale=(0.5, 5.0))
        for row in output.ratings:
            ratings.add(row.user_id, row.item_id, row.rating)
        for user_id in ratings.users():
            rated = list(ratings.of(user_id).items())
            seen, targets = split_seen_targets(
                rated, lambda e: e[1], seed=self.options.seed, user_id=user_id, holdout=self.options.holdout
            )
            need = InformationNeed(targets=[_ref(items, i) for i, _ in targets])
            profile = UserProfile(
                user_id=user_id,
                need=need,
                preferences=Preferences(items={i: ratings.normalized(r) for i, r in seen}),
                seen_items=[SeenItem(item=_ref(items, i), rating=r) for i, r in seen],
                metadata={
                    "dataset": "movielens",
                    "seen/target": f"{len(seen)} / {len(targets)}",
                    "split_seed": self.options.seed,
                },
            )
            output.profiles.append(profile)
            output.needs.append(NeedRecord(conversation_id=f"movielens:{user_id}", need=need))


def _ref(items: ItemCollection, item_id: str) -> ItemRef:
    item = items.get(item_id)
    return item.ref() if item is not None else ItemRef(id=item_id)
