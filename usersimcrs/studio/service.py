"""What participants and the researcher can do, independent of HTTP: join, get the next assignment,
talk to a CRS, label, vote, rate, guess. The web app (`studio.app`) maps pages and forms onto this.

Every action checks that the assignment belongs to the participant, validates its input against the
study's limits and rubric (`FormError`: shown on the page), and stores one record (`StudyStore`).
Records that exist once per thing (a label per conversation, a vote per battle, an answer per shown
conversation) have IDs derived from that thing, so a double click stores one record; chat messages
carry the form's submission ID.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, TypeVar

from usersimcrs.judges.rubrics import Criterion, Rubric
from usersimcrs.studio.allocation import (
    annotation_batch,
    choose_battle,
    choose_chat_crs,
    step_rng,
    turing_batch,
)
from usersimcrs.studio.config import BattleTask, ChatTask, Study, TaskName, dialogue_criteria, turn_criteria
from usersimcrs.studio.crs import CRSSessions
from usersimcrs.studio.dialogues import history
from usersimcrs.studio.pool import ConversationPool, PoolEntry, gold_pool, load_pool
from usersimcrs.studio.records import (
    AnnotationRecord,
    AssignmentRecord,
    ChatEndRecord,
    CompletionRecord,
    ExchangeRecord,
    LabelRecord,
    ParticipantRecord,
    ShownConversation,
    StudyRecord,
    TuringRecord,
    VoteRecordEvent,
)
from usersimcrs.studio.state import Conversation, StudyState, utc_now
from usersimcrs.studio.store import Conflict, Keys, StudyStore

R = TypeVar("R", bound=StudyRecord)
SUBMISSION_ID = re.compile(r"^[A-Za-z0-9_\-]{8,64}$")
EXTERNAL_ID = re.compile(r"^[A-Za-z0-9_\-.:@]{1,128}$")


class FormError(Exception):
    """Input a participant can correct (empty, too long, a missing answer); shown on the same page."""


class Forbidden(Exception):
    """Not this participant's assignment (or no such assignment)."""


class StudyClosed(Exception):
    """The open link issues no more links (the study is full)."""


@dataclass
class Pools:
    """The stored conversations the study shows: annotation candidates, gold ones, Turing pools."""

    annotate: ConversationPool | None = None
    gold: list[PoolEntry] = field(default_factory=list)
    human: ConversationPool | None = None
    simulated: ConversationPool | None = None

    def candidates(self) -> list[PoolEntry]:
        """Conversations to annotate (gold conversations taken from the source are left out)."""
        if self.annotate is None:
            return []
        gold_ids = {(e.source, e.dialogue.conversation_id) for e in self.gold}
        return [e for e in self.annotate.entries if (e.source, e.dialogue.conversation_id) not in gold_ids]

    def entry(self, shown: ShownConversation) -> PoolEntry | None:
        if shown.gold is not None:
            return self.gold[shown.gold] if shown.gold < len(self.gold) else None
        pools = (self.human, self.simulated) if shown.truth is not None else (self.annotate,)
        for pool in pools:
            if pool is not None and (entry := pool.get(shown.source, shown.conversation_id)) is not None:
                return entry
        return None


def load_pools(study: Study) -> Pools:
    """Read the study's conversation sources (annotation source, gold, Turing folders)."""
    pools = Pools()
    tasks = study.config.tasks
    if tasks.annotate is not None:
        source = study.annotate_source()
        pools.annotate = load_pool(source) if source is not None else None
        pools.gold = gold_pool(tasks.annotate.gold, pools.annotate)
    if tasks.turing is not None:
        pools.human = load_pool(study.input_path(tasks.turing.human))
        pools.simulated = load_pool(study.input_path(tasks.turing.simulated))
    return pools


PageKind = Literal["chat", "label", "vote", "annotate", "turing", "done"]


@dataclass
class Page:
    """Where an assignment stands: the page to show next and what it is about."""

    kind: PageKind
    assignment: AssignmentRecord
    conversation: Conversation | None = None
    side: int | None = None
    position: int | None = None
    entry: PoolEntry | None = None


class StudyService:
    """The study's operations over its store, pools and CRS sessions."""

    def __init__(self, study: Study, store: StudyStore, keys: Keys, pools: Pools, sessions: CRSSessions | None) -> None:
        self.study = study
        self.store = store
        self.keys = keys
        self.pools = pools
        self.sessions = sessions
        self._tokens = {keys.participant_token(pid): pid for pid in store.state.participants}

    @property
    def state(self) -> StudyState:
        return self.store.state

    # ------------------------------------------------------------------ participants

    def participant_for(self, token: str) -> str | None:
        return self._tokens.get(token)

    def _remember(self, participant_id: str) -> None:
        self._tokens[self.keys.participant_token(participant_id)] = participant_id

    def _new_participant(
        self, state: StudyState, record_id: str, origin: Literal["link", "open"], external_id: str | None
    ) -> StudyRecord:
        if external_id and external_id in state.by_external_id:
            raise _Existing(state.by_external_id[external_id])
        if origin == "open" and len(state.participants) >= self.study.config.participants.max_participants:
            raise StudyClosed()
        index = len(state.participants) + 1
        return ParticipantRecord(
            record_id=record_id, participant_id=f"P{index:05d}", index=index, origin=origin, external_id=external_id
        )

    async def join(self, submission_id: str, external_id: str | None = None) -> str:
        """A participant from the open link (one per submission; one per platform ID)."""
        _check_submission(submission_id)
        if external_id is not None and not EXTERNAL_ID.match(external_id):
            external_id = None
        try:
            record, _ = await self.store.submit(
                f"join:{submission_id}",
                lambda s: self._new_participant(s, f"join:{submission_id}", "open", external_id),
            )
        except _Existing as existing:
            return existing.participant_id
        self._remember(record.participant_id)
        return record.participant_id

    def issue_links(self, count: int) -> list[str]:
        """`count` new participants with personal links (before the server runs, or from the admin page)."""
        out = []
        for _ in range(count):
            record_id = f"link:{len(self.state.participants) + 1}"
            record = self._new_participant(self.state, record_id, "link", None)
            stored, _ = self.store.append_now(record)
            self._remember(stored.participant_id)
            out.append(stored.participant_id)
        return out

    async def issue_links_async(self, count: int) -> list[str]:
        out = []
        for _ in range(count):
            record_id = f"link:{len(self.state.participants) + 1}"

            def build(state: StudyState, record_id: str = record_id) -> StudyRecord:
                return self._new_participant(state, record_id, "link", None)

            record, _ = await self.store.submit(record_id, build)
            self._remember(record.participant_id)
            out.append(record.participant_id)
        return out

    # ------------------------------------------------------------------ plan and assignments

    def assignment_of(self, participant_id: str, assignment_id: str) -> AssignmentRecord:
        assignment = self.state.assignments.get(assignment_id)
        if assignment is None or assignment.participant_id != participant_id:
            raise Forbidden()
        return assignment

    def progress(self, participant_id: str) -> list[tuple[TaskName, str]]:
        """(task, 'done' | 'open' | 'to do') for each step of the participant's plan."""
        plan = self.state.plans.get(participant_id, {})
        out = []
        for step, (task, _) in enumerate(self.study.plan()):
            assignment = self.state.assignments.get(plan[step]) if step in plan else None
            status = "to do" if assignment is None else "done" if self.state.is_done(assignment) else "open"
            out.append((task, status))
        return out

    def completed(self, participant_id: str) -> bool:
        return participant_id in self.state.completions

    async def next_assignment(self, participant_id: str) -> AssignmentRecord | None:
        """The participant's first unfinished assignment, made now if needed; None when all are done."""
        plan = self.study.plan()
        for step in range(len(plan)):
            existing = self.state.plans.get(participant_id, {}).get(step)
            if existing is not None:
                if not self.state.is_done(self.state.assignments[existing]):
                    return self.state.assignments[existing]
                continue

            def build(state: StudyState, step: int = step) -> StudyRecord:
                return self._assign(state, participant_id, step)

            record, _ = await self.store.submit(f"assign:{participant_id}:{step}", build)
            assert isinstance(record, AssignmentRecord)
            if not self.state.is_done(record):  # an annotation step with nothing left to rate is skipped
                return record
        await self.store.append(CompletionRecord(record_id=f"complete:{participant_id}", participant_id=participant_id))
        return None

    async def finish_if_done(self, participant_id: str) -> bool:
        """Record the participant's completion once every step of their plan is done; True when complete."""
        plan = self.state.plans.get(participant_id, {})
        steps = len(self.study.plan())
        if len(plan) < steps or not all(self.state.is_done(self.state.assignments[a]) for a in plan.values()):
            return False
        await self.store.append(CompletionRecord(record_id=f"complete:{participant_id}", participant_id=participant_id))
        return True

    def _assign(self, state: StudyState, participant_id: str, step: int) -> AssignmentRecord:
        """Step `step` of a participant: the least-used CRS, pair or conversations, ties drawn from the seed."""
        task, _ = self.study.plan()[step]
        participant = state.participants[participant_id]
        rng = step_rng(self.study.config.seed, participant.index, step)
        now, expiry = utc_now(), timedelta(minutes=self.study.config.limits.assignment_expiry_min)
        assignment_id = f"{participant_id}-{step:02d}"
        record = AssignmentRecord(
            record_id=f"assign:{participant_id}:{step}",
            participant_id=participant_id,
            assignment_id=assignment_id,
            step=step,
            task=task,
        )
        tasks = self.study.config.tasks
        prefix = f"{self.study.name}-{assignment_id}"
        if task == "chat" and tasks.chat is not None:
            record.crs = [choose_chat_crs(tasks.chat.crs, state.chat_counts("chat", now, expiry), rng)]
            record.conversation_ids = [prefix]
        elif task == "battle" and tasks.battle is not None:
            record.crs = list(choose_battle(tasks.battle.crs, state.pair_counts(now, expiry), rng))
            record.conversation_ids = [f"{prefix}-a", f"{prefix}-b"]
        elif task == "annotate" and tasks.annotate is not None:
            seen = state.seen_by(participant_id)
            candidates = [e for e in self.pools.candidates() if e.dialogue.conversation_id not in seen]
            record.shown = annotation_batch(
                candidates,
                self.pools.gold,
                state.shown_counts("annotate", now, expiry),
                state.gold_counts(),
                batch=tasks.annotate.batch,
                k=tasks.annotate.k,
                rng=rng,
            )
        elif task == "turing" and tasks.turing is not None:
            record.shown = turing_batch(
                self.pools.human.entries if self.pools.human else [],
                self.pools.simulated.entries if self.pools.simulated else [],
                state.shown_counts("turing", now, expiry),
                batch=tasks.turing.batch,
                exclude=state.seen_by(participant_id),
                rng=rng,
            )
        return record

    def chat_task(self, assignment: AssignmentRecord) -> ChatTask:
        task = self.study.config.tasks.battle if assignment.task == "battle" else self.study.config.tasks.chat
        assert task is not None
        return task

    def page(self, assignment: AssignmentRecord) -> Page:
        """The page an assignment is at (see the module docstring for the order of pages)."""
        state = self.state
        if assignment.task in ("chat", "battle"):
            task = self.chat_task(assignment)
            label = assignment.task == "chat" or (isinstance(task, BattleTask) and task.label_each)
            for side, conversation_id in enumerate(assignment.conversation_ids):
                conversation = state.conversations[conversation_id]
                if conversation.end is None:
                    return Page("chat", assignment, conversation, side)
                if label and conversation.label is None:
                    return Page("label", assignment, conversation, side)
            if assignment.task == "battle" and assignment.assignment_id not in state.votes:
                return Page("vote", assignment)
            return Page("done", assignment)
        answers = state.annotations if assignment.task == "annotate" else state.turing
        for position, shown in enumerate(assignment.shown):
            if (assignment.assignment_id, position) not in answers:
                kind: PageKind = "annotate" if assignment.task == "annotate" else "turing"
                return Page(kind, assignment, position=position, entry=self.pools.entry(shown))
        return Page("done", assignment)

    # ------------------------------------------------------------------ chat

    def _conversation(
        self, participant_id: str, assignment_id: str, conversation_id: str, *, current: bool = True
    ) -> Conversation:
        """The participant's conversation; with `current`, only the one their assignment is at now
        (a battle's second conversation cannot be started, nor its first changed, out of turn)."""
        assignment = self.assignment_of(participant_id, assignment_id)
        if conversation_id not in assignment.conversation_ids:
            raise Forbidden()
        page = self.page(assignment)
        if current and (page.conversation is None or page.conversation.conversation_id != conversation_id):
            raise FormError("This form is out of date; please reload the page.")
        return self.state.conversations[conversation_id]

    async def send_message(
        self, participant_id: str, assignment_id: str, conversation_id: str, turn: int, submission_id: str, text: str
    ) -> ExchangeRecord:
        """The participant's message and the CRS's answer (or its failure), stored as one exchange.

        `text` may be empty only for the CRS's opening turn. A stale form (the conversation moved on
        or ended) is a FormError: nothing is stored, and the page says the message was not sent.
        """
        _check_submission(submission_id)
        record_id = f"msg:{submission_id}"
        stored = self.state.records.get(record_id)
        if isinstance(stored, ExchangeRecord) and stored.participant_id == participant_id:
            return stored  # a retry of a message already answered: acknowledged again, stored once
        conversation = self._conversation(participant_id, assignment_id, conversation_id)
        task = self.chat_task(self.state.assignments[assignment_id])
        opening = task.opening == "crs" and not conversation.exchanges
        if not opening:
            text = _clean(text)
            if not text:
                raise FormError("Please type a message first.")
            if len(text) > self.study.config.limits.message_chars:
                raise FormError(f"Messages are limited to {self.study.config.limits.message_chars} characters.")
        assert self.sessions is not None
        async with self.sessions.lock(conversation_id):
            stored = self.state.records.get(record_id)
            if stored is not None:  # a retried or double-clicked message: answered once
                if not isinstance(stored, ExchangeRecord):
                    raise FormError("This form is out of date; please reload the page.")
                return stored
            if conversation.end is not None:
                raise FormError("This conversation has ended; your message was not sent.")
            if turn != len(conversation.exchanges) or conversation.user_turns >= task.max_turns:
                raise FormError("The conversation moved on in another window; your message was not sent.")
            outcome = await self.sessions.reply(conversation.crs, history(conversation), None if opening else text)
            reply = outcome.reply
            record = ExchangeRecord(
                record_id=record_id,
                participant_id=participant_id,
                assignment_id=assignment_id,
                conversation_id=conversation_id,
                turn=turn,
                user_text=None if opening else text,
                reply_text=reply.text if reply else None,
                items=list(reply.items) if reply else [],
                items_from_text=reply.items_from_text if reply else False,
                error=outcome.error,
                latency_s=round(outcome.latency_s, 4),
            )
            try:
                stored_exchange, _ = await self.store.append(record)
            except Conflict as exc:
                raise FormError(f"Your message was not sent ({exc}).") from None
        if conversation.user_turns >= task.max_turns:
            await self._end(conversation, "max_turns")
        assert isinstance(stored_exchange, ExchangeRecord)
        return stored_exchange

    async def end_chat(self, participant_id: str, assignment_id: str, conversation_id: str) -> None:
        conversation = self._conversation(participant_id, assignment_id, conversation_id, current=False)
        if conversation.end is not None:
            return  # a double click on "end"
        self._conversation(participant_id, assignment_id, conversation_id)
        task = self.chat_task(self.state.assignments[assignment_id])
        if conversation.user_turns < task.min_turns:
            raise FormError(f"Please talk to the system for at least {task.min_turns} turn(s) before ending.")
        await self._end(conversation, "user_stop")

    async def _end(self, conversation: Conversation, reason: Literal["user_stop", "max_turns"]) -> None:
        try:
            await self.store.append(
                ChatEndRecord(
                    record_id=f"end:{conversation.conversation_id}",
                    participant_id=conversation.participant_id,
                    assignment_id=conversation.assignment_id,
                    conversation_id=conversation.conversation_id,
                    reason=reason,
                )
            )
        except Conflict:
            pass
        if self.sessions is not None:
            await self.sessions.close(conversation.conversation_id)

    def chat_criteria(self, assignment: AssignmentRecord) -> list[Criterion]:
        """The dialogue aspects asked after a conversation of this assignment (none for battles by default)."""
        rubric = self.study.chat_rubric
        if rubric is None or not self.chat_task(assignment).rate_aspects:
            return []
        return dialogue_criteria(rubric)

    async def label(
        self, participant_id: str, assignment_id: str, conversation_id: str, form: dict[str, str]
    ) -> LabelRecord:
        labelled = f"label:{conversation_id}" in self.state.records  # a repeat returns the stored label
        conversation = self._conversation(participant_id, assignment_id, conversation_id, current=not labelled)
        assignment = self.state.assignments[assignment_id]
        satisfaction = form.get("satisfaction")
        if satisfaction not in ("satisfied", "frustrated"):
            raise FormError("Please say whether you were satisfied or frustrated.")
        ratings = _ratings(form, "d:", self.chat_criteria(assignment), self.study.chat_rubric)
        record = LabelRecord(
            record_id=f"label:{conversation_id}",
            participant_id=participant_id,
            assignment_id=assignment_id,
            conversation_id=conversation.conversation_id,
            satisfaction=satisfaction,
            ratings=ratings,
        )
        return await self._store_once(record, LabelRecord)

    async def vote(self, participant_id: str, assignment_id: str, outcome: str, feedback: str) -> VoteRecordEvent:
        assignment = self.assignment_of(participant_id, assignment_id)
        if assignment.task != "battle":
            raise Forbidden()
        if self.page(assignment).kind != "vote":
            raise FormError("Please finish both conversations before voting.")
        if outcome not in ("a", "b", "tie"):
            raise FormError("Please choose A, B or tie.")
        feedback = _clean(feedback)
        if len(feedback) > self.study.config.limits.feedback_chars:
            raise FormError(f"Feedback is limited to {self.study.config.limits.feedback_chars} characters.")
        record = VoteRecordEvent(
            record_id=f"vote:{assignment_id}",
            participant_id=participant_id,
            assignment_id=assignment_id,
            outcome=outcome,
            feedback=feedback or None,
        )
        return await self._store_once(record, VoteRecordEvent)

    # ------------------------------------------------------------------ annotation and Turing

    def _shown(self, participant_id: str, assignment_id: str, position: int, task: str) -> ShownConversation:
        assignment = self.assignment_of(participant_id, assignment_id)
        if assignment.task != task or not 0 <= position < len(assignment.shown):
            raise Forbidden()
        return assignment.shown[position]

    async def annotate(
        self, participant_id: str, assignment_id: str, position: int, form: dict[str, str]
    ) -> AnnotationRecord:
        shown = self._shown(participant_id, assignment_id, position, "annotate")
        rubric = self.study.rubric
        task = self.study.config.tasks.annotate
        assert rubric is not None and task is not None
        entry = self.pools.entry(shown)
        ratings = _ratings(form, "d:", dialogue_criteria(rubric), rubric)
        turn_ratings: dict[int, dict[str, int]] = {}
        if entry is not None:
            for index, utterance in enumerate(entry.dialogue.utterances):
                if utterance.participant == "AGENT" and turn_criteria(rubric):
                    turn_ratings[index] = _ratings(form, f"t:{index}:", turn_criteria(rubric), rubric)
        gold_passed = None
        if shown.gold is not None:
            spec = task.gold[shown.gold]
            gold_passed = all(abs(ratings[name] - value) <= spec.tolerance for name, value in spec.answers.items())
        record = AnnotationRecord(
            record_id=f"ann:{assignment_id}:{position}",
            participant_id=participant_id,
            assignment_id=assignment_id,
            position=position,
            conversation_id=shown.conversation_id,
            ratings=ratings,
            turn_ratings=turn_ratings,
            gold=shown.gold,
            gold_passed=gold_passed,
        )
        return await self._store_once(record, AnnotationRecord)

    async def answer_turing(
        self, participant_id: str, assignment_id: str, position: int, answer: str, confidence: str | None
    ) -> TuringRecord:
        shown = self._shown(participant_id, assignment_id, position, "turing")
        if answer not in ("human", "simulated"):
            raise FormError("Please choose 'a person' or 'a simulated user'.")
        level = None
        if confidence:
            if confidence not in ("1", "2", "3"):
                raise FormError("Please choose a confidence level from the list.")
            level = int(confidence)
        assert shown.truth is not None
        record = TuringRecord(
            record_id=f"turing:{assignment_id}:{position}",
            participant_id=participant_id,
            assignment_id=assignment_id,
            position=position,
            conversation_id=shown.conversation_id,
            answer=answer,
            truth=shown.truth,
            confidence=level,
        )
        return await self._store_once(record, TuringRecord)

    async def _store_once(self, record: R, kind: type[R]) -> R:
        try:
            stored, _ = await self.store.append(record)
        except Conflict as exc:
            raise FormError(f"Already answered ({exc}).") from None
        assert isinstance(stored, kind)
        return stored


class _Existing(Exception):
    def __init__(self, participant_id: str) -> None:
        self.participant_id = participant_id


def _check_submission(submission_id: str) -> None:
    if not SUBMISSION_ID.match(submission_id or ""):
        raise FormError("This form is out of date; please reload the page.")


def _clean(text: str | None) -> str:
    """Text as typed, without NUL and other control characters (newlines and tabs kept), trimmed."""
    return "".join(ch for ch in (text or "") if ch in "\n\t" or ch >= " ").strip()


def _ratings(form: dict[str, str], prefix: str, criteria: list[Criterion], rubric: Rubric | None) -> dict[str, int]:
    """One allowed score per criterion from the form fields `<prefix><criterion>`."""
    out: dict[str, int] = {}
    for criterion in criteria:
        assert rubric is not None
        raw = form.get(prefix + criterion.name)
        allowed = rubric.valid_scores(criterion)
        try:
            value = int(raw) if raw is not None else None
        except ValueError:
            value = None
        if value is None or value not in allowed:
            raise FormError(f"Please answer every question ('{criterion.title}' is missing).")
        out[criterion.name] = value
    return out
