"""The study's state: the replay of its log, and the questions the pages and the balancing ask of it.

`StudyState.apply` is the only way state changes, so the state after a restart (replaying the
log) is the state before it. Uniqueness rules live here too (one label per conversation, one
vote per battle, one answer per shown conversation): `conflict` says why a new record would break
one, so a stale form submitted twice with different submission IDs is refused, not stored twice.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from usersimcrs.studio.records import (
    AnnotationRecord,
    AssignmentRecord,
    ChatEndRecord,
    CompletionRecord,
    ExchangeRecord,
    LabelRecord,
    ParticipantRecord,
    StudyRecord,
    TuringRecord,
    VoteRecordEvent,
    parse_iso,
)


@dataclass
class Conversation:
    """A conversation a participant holds with a CRS: its exchanges and how it ended."""

    conversation_id: str
    assignment_id: str
    participant_id: str
    crs: str
    exchanges: list[ExchangeRecord] = field(default_factory=list)
    end: ChatEndRecord | None = None
    label: LabelRecord | None = None

    @property
    def user_turns(self) -> int:
        """User turns the CRS answered (a failed exchange does not count)."""
        return sum(1 for e in self.exchanges if e.error is None and e.user_text is not None)

    @property
    def opened(self) -> bool:
        """True once the CRS has said something (it answered a first message or opened)."""
        return any(e.error is None for e in self.exchanges)


@dataclass
class StudyState:
    """Everything the log says, indexed for the pages, the balancing and the export."""

    records: dict[str, StudyRecord] = field(default_factory=dict)
    participants: dict[str, ParticipantRecord] = field(default_factory=dict)
    by_external_id: dict[str, str] = field(default_factory=dict)
    assignments: dict[str, AssignmentRecord] = field(default_factory=dict)
    plans: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    conversations: dict[str, Conversation] = field(default_factory=dict)
    votes: dict[str, VoteRecordEvent] = field(default_factory=dict)
    annotations: dict[tuple[str, int], AnnotationRecord] = field(default_factory=dict)
    turing: dict[tuple[str, int], TuringRecord] = field(default_factory=dict)
    completions: dict[str, CompletionRecord] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def conflict(self, record: StudyRecord) -> str | None:
        """Why `record` may not be stored now (None when it may): a repeat of something answered."""
        if isinstance(record, ParticipantRecord) and record.participant_id in self.participants:
            return "this participant already exists"
        if isinstance(record, AssignmentRecord) and record.step in self.plans.get(record.participant_id, {}):
            return "this step already has its assignment"
        if isinstance(record, ExchangeRecord):
            conversation = self.conversations.get(record.conversation_id)
            if conversation is None:
                return "unknown conversation"
            if conversation.end is not None:
                return "the conversation has ended"
            if record.turn != len(conversation.exchanges):
                return "a newer message was already sent"
        if isinstance(record, ChatEndRecord):
            conversation = self.conversations.get(record.conversation_id)
            if conversation is None or conversation.end is not None:
                return "the conversation has already ended"
        if isinstance(record, LabelRecord):
            conversation = self.conversations.get(record.conversation_id)
            if conversation is None or conversation.end is None:
                return "the conversation has not ended"
            if conversation.label is not None:
                return "this conversation is already labelled"
        if isinstance(record, VoteRecordEvent) and record.assignment_id in self.votes:
            return "this battle already has a vote"
        if isinstance(record, AnnotationRecord) and (record.assignment_id, record.position) in self.annotations:
            return "this conversation is already rated"
        if isinstance(record, TuringRecord) and (record.assignment_id, record.position) in self.turing:
            return "this conversation is already answered"
        if isinstance(record, CompletionRecord) and record.participant_id in self.completions:
            return "already completed"
        return None

    def apply(self, record: StudyRecord) -> None:
        """Add one record to the state (the log's order is the order of application)."""
        self.records[record.record_id] = record
        self.order.append(record.record_id)
        if isinstance(record, ParticipantRecord):
            self.participants[record.participant_id] = record
            if record.external_id:
                self.by_external_id[record.external_id] = record.participant_id
        elif isinstance(record, AssignmentRecord):
            self.assignments[record.assignment_id] = record
            self.plans[record.participant_id][record.step] = record.assignment_id
            for crs, conversation_id in zip(record.crs, record.conversation_ids, strict=False):
                self.conversations[conversation_id] = Conversation(
                    conversation_id, record.assignment_id, record.participant_id, crs
                )
        elif isinstance(record, ExchangeRecord):
            self.conversations[record.conversation_id].exchanges.append(record)
        elif isinstance(record, ChatEndRecord):
            self.conversations[record.conversation_id].end = record
        elif isinstance(record, LabelRecord):
            self.conversations[record.conversation_id].label = record
        elif isinstance(record, VoteRecordEvent):
            self.votes[record.assignment_id] = record
        elif isinstance(record, AnnotationRecord):
            self.annotations[(record.assignment_id, record.position)] = record
        elif isinstance(record, TuringRecord):
            self.turing[(record.assignment_id, record.position)] = record
        elif isinstance(record, CompletionRecord):
            self.completions[record.participant_id] = record

    # ------------------------------------------------------------------ questions of the pages

    def participant_assignments(self, participant_id: str) -> list[AssignmentRecord]:
        plan = self.plans.get(participant_id, {})
        return [self.assignments[plan[step]] for step in sorted(plan)]

    def is_done(self, assignment: AssignmentRecord) -> bool:
        """True when every page of the assignment has been answered."""
        if assignment.task == "chat":
            conversation = self.conversations[assignment.conversation_ids[0]]
            return conversation.label is not None
        if assignment.task == "battle":
            return assignment.assignment_id in self.votes
        if assignment.task == "annotate":
            return all((assignment.assignment_id, i) in self.annotations for i in range(len(assignment.shown)))
        return all((assignment.assignment_id, i) in self.turing for i in range(len(assignment.shown)))

    def is_open(self, assignment: AssignmentRecord, now: datetime, expiry: timedelta) -> bool:
        """An unfinished assignment made less than `expiry` ago (it still counts for balancing)."""
        return not self.is_done(assignment) and now - parse_iso(assignment.at) < expiry

    # ------------------------------------------------------------------ counts for the balancing

    def chat_counts(self, task: str, now: datetime, expiry: timedelta) -> dict[str, int]:
        """Conversations per CRS in `task` assignments: finished ones and recent unfinished ones."""
        counts: dict[str, int] = defaultdict(int)
        for assignment in self.assignments.values():
            if assignment.task == task and (self.is_done(assignment) or self.is_open(assignment, now, expiry)):
                for crs in assignment.crs:
                    counts[crs] += 1
        return counts

    def pair_counts(self, now: datetime, expiry: timedelta) -> dict[tuple[str, str], int]:
        """Battles per unordered CRS pair: finished ones and recent unfinished ones."""
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for assignment in self.assignments.values():
            if assignment.task == "battle" and (self.is_done(assignment) or self.is_open(assignment, now, expiry)):
                a, b = sorted(assignment.crs)
                counts[(a, b)] += 1
        return counts

    def shown_counts(self, task: str, now: datetime, expiry: timedelta) -> dict[str, int]:
        """Per stored conversation: answers given in `task`, plus recent unanswered assignments of it."""
        counts: dict[str, int] = defaultdict(int)
        answers = self.annotations if task == "annotate" else self.turing
        for assignment in self.assignments.values():
            if assignment.task != task:
                continue
            recent = now - parse_iso(assignment.at) < expiry
            for position, shown in enumerate(assignment.shown):
                if shown.gold is not None:
                    continue
                if (assignment.assignment_id, position) in answers or recent:
                    counts[shown.conversation_id] += 1
        return counts

    def gold_counts(self) -> dict[int, int]:
        counts: dict[int, int] = defaultdict(int)
        for assignment in self.assignments.values():
            for shown in assignment.shown:
                if shown.gold is not None:
                    counts[shown.gold] += 1
        return counts

    def seen_by(self, participant_id: str) -> set[str]:
        """Stored conversations already shown to a participant (never shown twice)."""
        return {
            shown.conversation_id
            for assignment in self.participant_assignments(participant_id)
            for shown in assignment.shown
        }


def utc_now() -> datetime:
    return datetime.now(UTC)
