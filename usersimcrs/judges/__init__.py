"""LLM-as-judge over stored conversations: quality aspects, CoRE factors and debate, PEPPER, persuasiveness.

Judges share one prompt builder (`prompt_builder`), one output parser with bounded retries
(`parsing`) and one record type (`Judgment`); a score that cannot be read is ``None`` with a
status, never 0. Rubrics are YAML data in the top-level `rubrics` package.
"""

from usersimcrs.judges.base import Judge, JudgeOptions, Judgment, PlannedCall, judges

__all__ = ["Judge", "JudgeOptions", "Judgment", "PlannedCall", "judges"]
