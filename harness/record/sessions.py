"""Sessions and subagents, reconstructed from the captured requests (docs/record.md, "Sessions").

Requests are taken in send order. Each has a *context*: the key of its tool schemas, then one
key per message (`record.standins`), so "extends" and "shares a prefix" are compared message by
message, on keys, never on text. The rules, in order:

1. **Agent header**: a request naming its own session (`X-Dynamo-Session-ID`) belongs to that
   session; a parent header (`X-Dynamo-Parent-Session-ID`) names its parent. A **task header**
   (`TASK_HEADERS`: `X-Session-ID`, `session_id`, ...) puts a request in one task: the rules
   below match it only with requests of the same task. A **parent header** alone
   (`X-Parent-Session-ID`, as the harness's own replay sends it) marks a subagent's request: it
   continues only a subagent's session, and a subagent's first request is forked from the
   turn it extends or shares the most with (else spawned by the task's latest session).
2. **Continuation**: a request whose context extends (is longer than and starts with) the
   last request of a session (that has ended) continues that session; of several, the longest
   such context (then the latest).
3. **Fork, by a later continuation**: a request that answers turn j of a session that has gone
   on past j (sends its context back and then a reply, an assistant message), sent when every
   request after j has ended, continues the session from j, and the
   requests after j become a forked subagent of it (fork point j): a parent sends its next turn
   after its subagents end (the join), and an agent rewound to turn j goes on from there, so
   the last of the requests that extend turn j is the session's own. Sent while a request after
   j still runs, it is a subagent forked at j.
4. **Fork**: a request that shares more than a task's opening with an earlier request (a prefix
   holding an assistant message), and extends none, is a forked subagent of the session it
   shares the most with, forked at that request's turn. An identical opening (system part and
   first message, as a rerun task or a subagent started twice sends) shares no reply: rule 5.
5. **Spawn or new task**: a fresh context (no reply shared with an earlier request) sent within
   `spawn_window_s` after a session's reply that called tools, before that session sent again, is
   a spawned subagent of the latest such session; otherwise it starts a new main session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TASK_HEADERS = (
    "x-session-id",  # the harness's own replay, OpenCode, routers
    "x-root-session-id",
    "x-correlation-id",  # AIPerf
    "x-smg-routing-key",  # SGLang Model Gateway
    "session_id",  # Codex CLI
    "conversation_id",
    "x-claude-code-session-id",  # Claude Code
)
AGENT_HEADERS = ("x-dynamo-session-id",)
PARENT_HEADERS = ("x-dynamo-parent-session-id", "x-parent-session-id")
SESSION_HEADERS = TASK_HEADERS + AGENT_HEADERS + PARENT_HEADERS
SPAWN_WINDOW_S = 10.0


@dataclass
class Captured:
    """What reconstruction reads of one request (all of it privacy-safe: keys and times)."""

    t_sent: float
    t_end: float
    context: tuple[str, ...]
    system: int  # leading context entries that are the system part (tools, system messages)
    headers: dict[str, str] = field(default_factory=dict)  # session headers, names lower case
    calls: int = 0  # tool calls in its reply
    replies: frozenset[int] = frozenset()  # context positions of its assistant messages


@dataclass(eq=False)
class Plan:
    """A reconstructed session: its requests in order (indices into the captured list)."""

    requests: list[int]
    scope: str | None
    parent: Plan | None = None
    mode: str | None = None  # fork / spawn / None (main)
    fork_turn: int | None = None
    after: int | None = None  # the parent's turn it started after
    agent: str | None = None  # its own id from an agent header
    rule: str = "new"  # what made it: new, header, fork, spawn
    sub: bool = False  # its requests carry a parent header


def _header(headers: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((headers[n] for n in names if headers.get(n)), None)


class Reconstruction:
    def __init__(self, captured: list[Captured], spawn_window_s: float = SPAWN_WINDOW_S) -> None:
        self.captured, self.window = captured, spawn_window_s
        self.plans: list[Plan] = []
        self.where: dict[int, Plan] = {}  # request -> its session
        self._edges: dict[tuple[int, str], int] = {}  # the trie over contexts
        self._latest: dict[int, int] = {}  # node -> latest request through it
        self._ends: dict[int, list[int]] = {}  # node -> requests whose context ends there
        self._agents: dict[str, Plan] = {}

    def run(self) -> list[Plan]:
        order = sorted(range(len(self.captured)), key=lambda i: (self.captured[i].t_sent, i))
        for i in order:
            self._place(i)
            self._insert(i)
        return self.plans

    # ---- the trie of contexts --------------------------------------------------------------

    def _walk(self, i: int) -> tuple[list[int], int, int | None]:
        """Requests whose context is a prefix of request i's, the depth shared with the deepest
        earlier request, and the latest request at that depth."""
        node, prefixes, depth = 0, list(self._ends.get(0, [])), 0
        for key in self.captured[i].context:
            nxt = self._edges.get((node, key))
            if nxt is None:
                break
            node, depth = nxt, depth + 1
            prefixes += self._ends.get(node, [])
        deepest = self._latest.get(node) if node > 0 else None
        return prefixes, depth, deepest

    def _insert(self, i: int) -> None:
        node = 0
        for key in self.captured[i].context:
            nxt = self._edges.get((node, key))
            if nxt is None:
                nxt = self._edges[(node, key)] = len(self._edges) + 1
            node = nxt
            self._latest[node] = i
        self._ends.setdefault(node, []).append(i)

    # ---- the rules -------------------------------------------------------------------------

    def _place(self, i: int) -> None:
        c = self.captured[i]
        scope = _header(c.headers, TASK_HEADERS)
        agent = _header(c.headers, AGENT_HEADERS)
        if agent is not None:
            self._by_agent(i, agent, scope)
            return
        prefixes, depth, deepest = self._walk(i)
        sub = _header(c.headers, PARENT_HEADERS) is not None
        mine = [j for j in prefixes if self._mine(j, scope, sub)]
        if self._continue(i, mine):
            return
        if sub:
            self._subagent(i, scope, prefixes, depth, deepest)
            return
        if (
            deepest is not None
            and self._shares_reply(i, depth)
            and self.where[deepest].scope == scope
        ):
            parent = self.where[deepest]
            self._new(i, scope, parent, "fork", parent.requests.index(deepest), "fork")
            return
        self._spawn_or_main(i, scope)

    def _answers(self, i: int, j: int) -> bool:
        """Request i sends j's whole context back and then a reply (an assistant message)."""
        ci, cj = self.captured[i], self.captured[j]
        return len(ci.context) > len(cj.context) and len(cj.context) in ci.replies

    def _shares_reply(self, i: int, depth: int) -> bool:
        """The first `depth` entries of i's context, shared with an earlier request, hold an
        assistant message: more than a task's opening (identical openings start new sessions)."""
        c = self.captured[i]
        return depth > c.system and any(p < depth for p in c.replies)

    def _mine(self, j: int, scope: str | None, sub: bool) -> bool:
        plan = self.where[j]
        return plan.scope == scope and plan.agent is None and plan.sub == sub

    def _subagent(self, i: int, scope, prefixes: list[int], depth: int, deepest) -> None:
        """The first request of a subagent (a parent header says so): forked at the turn whose
        context it extends or shares the most with, else spawned by the latest session of its
        task that had ended a request before it."""
        c = self.captured[i]
        inside = [j for j in prefixes if self.where[j].scope == scope and self._answers(i, j)]
        if inside or (deepest is not None and self._shares_reply(i, depth)):
            j = max(inside, key=lambda j: (len(self.captured[j].context), j)) if inside else deepest
            forked = self.where[j]
            turn = forked.requests.index(j)
            self._new(i, scope, forked, "fork", turn, "header", after=turn).sub = True
            return
        ended = [
            p
            for p in self.plans
            if p.scope == scope and not p.sub and self.captured[p.requests[-1]].t_end <= c.t_sent
        ]
        parent = max(ended, key=lambda p: self.captured[p.requests[-1]].t_end, default=None)
        self._new(i, scope, parent, "spawn" if parent else None, None, "header").sub = True

    def _continue(self, i: int, prefixes: list[int]) -> bool:
        c = self.captured[i]
        ended = [
            j
            for j in prefixes
            if self.captured[j].t_end <= c.t_sent and len(self.captured[j].context) < len(c.context)
        ]
        lasts = [j for j in ended if self.where[j].requests[-1] == j]
        if lasts:
            best = max(
                lasts, key=lambda j: (len(self.captured[j].context), self.captured[j].t_sent)
            )
            self._append(self.where[best], i)
            return True
        answered = [j for j in ended if self._answers(i, j)]
        if not answered:
            return False
        j = max(answered, key=lambda j: (len(self.captured[j].context), j))
        plan = self.where[j]
        turn = plan.requests.index(j)
        if all(self.captured[k].t_end <= c.t_sent for k in plan.requests[turn + 1 :]):
            self._split(plan, turn)
            self._append(plan, i)
        else:  # the session goes on from there meanwhile: a subagent forked at that turn
            self._new(i, plan.scope, plan, "fork", turn, "fork", after=turn)
        return True

    def _spawn_or_main(self, i: int, scope: str | None) -> None:
        c = self.captured[i]
        waiting = [
            p
            for p in self.plans
            if p.scope == scope
            and self.captured[p.requests[-1]].calls > 0
            and 0 <= c.t_sent - self.captured[p.requests[-1]].t_end <= self.window
        ]
        if waiting:
            parent = max(waiting, key=lambda p: self.captured[p.requests[-1]].t_end)
            self._new(i, scope, parent, "spawn", None, "spawn")
        else:
            self._new(i, scope, None, None, None, "new")

    def _by_agent(self, i: int, agent: str, scope: str | None) -> None:
        plan = self._agents.get(agent)
        if plan is not None:
            self._append(plan, i)
            return
        parent = self._agents.get(_header(self.captured[i].headers, PARENT_HEADERS) or "")
        if parent is None:
            plan = self._new(i, scope, None, None, None, "header")
        else:
            _, depth, deepest = self._walk(i)
            fork = deepest is not None and self.where[deepest] is parent
            fork = fork and depth > self.captured[i].system
            turn = parent.requests.index(deepest) if fork and deepest is not None else None
            plan = self._new(i, scope, parent, "fork" if fork else "spawn", turn, "header")
        plan.agent = agent
        self._agents[agent] = plan

    # ---- sessions --------------------------------------------------------------------------

    def _new(self, i, scope, parent, mode, fork_turn, rule, after=None) -> Plan:
        if parent is not None and after is None:  # the parent's latest turn sent before it
            t = self.captured[i].t_sent
            after = max(k for k, j in enumerate(parent.requests) if self.captured[j].t_sent <= t)
        plan = Plan([i], scope, parent, mode, fork_turn, after, rule=rule)
        self.plans.append(plan)
        self.where[i] = plan
        return plan

    def _append(self, plan: Plan, i: int) -> None:
        plan.requests.append(i)
        self.where[i] = plan

    def _split(self, plan: Plan, turn: int) -> None:
        """The requests of `plan` after `turn` become a subagent forked from it at `turn`."""
        moved = plan.requests[turn + 1 :]
        del plan.requests[turn + 1 :]
        child = Plan(moved, plan.scope, plan, "fork", turn, turn, rule="fork")
        self.plans.insert(self.plans.index(plan) + 1, child)
        for j in moved:
            self.where[j] = child
        for p in self.plans:  # what started from the moved turns moves with them
            if p.parent is plan and p.after is not None and p.after > turn:
                p.parent, p.after = child, p.after - turn - 1
                if p.fork_turn is not None:
                    p.fork_turn -= turn + 1


def reconstruct(captured: list[Captured], spawn_window_s: float = SPAWN_WINDOW_S) -> list[Plan]:
    """The sessions of the captured requests, parents before their subagents."""
    plans = Reconstruction(captured, spawn_window_s).run()
    ordered: list[Plan] = []

    def visit(p: Plan) -> None:
        ordered.append(p)
        for child in sorted((q for q in plans if q.parent is p), key=lambda q: q.requests[0]):
            visit(child)

    for p in sorted((q for q in plans if q.parent is None), key=lambda q: q.requests[0]):
        visit(p)
    return ordered
