"""Successor hand-offs in the store: the leader writes them, a registry uses them.

The leader writes, inside its fenced pass, which task instance may start when another succeeds
(:func:`write_handoffs`, decided by ``schedd_core.handoffs``). The registry that applies that
success, in the same transaction, queues and claims the successor for the worker that reported it
(``statements.APPLY_RESULTS``, in the statement that applies the result), so a chain's next task
needs neither a pass of the leader nor a claim of its own.

What a hand-off guarantees: it starts a task instance only when the leader's usual path would have
queued it too: ``statements.handoffs._HAND_OFF`` re-checks, under the fence row's shared lock, the
term, the run's control version, the states, the worker's queues and the pool (see there). A
hand-off of a deposed term, of a run changed by hand since, or whose assumptions no longer hold
does nothing, and the leader queues the task the usual way. What it does not guarantee: strict
priority order against task instances waiting for the leader's admission in other pools, a
hand-off to a join whose other upstream task succeeds in the same batch of results (the leader
queues it), and it never starts more than one successor per success.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schedd_core.handoffs import Handoff
from schedd_store import statements as sql
from schedd_store.fence import FencedConnection


async def write_handoffs(
    conn: FencedConnection,
    token: int,
    handoffs: Sequence[Handoff],
    ti_ids: Mapping[int, Mapping[str, int]],
    created: Mapping[tuple[int, str], int],
) -> dict[int, dict[str, str]]:
    """Write ``handoffs`` (task instance keys resolved with ``ti_ids``, by run, and the ids of those
    the pass created); returns what is in place, by run: source key -> target key. A source row
    that another transaction holds (a registry applying its result) is skipped, never waited for:
    waiting could deadlock with that transaction's own hand-off, and a hand-off is an
    optimisation: without it the leader queues the successor as usual."""
    if not handoffs:
        return {}

    def ti_id(run_pk: int, key: str) -> int:
        return ti_ids.get(run_pk, {}).get(key) or created[(run_pk, key)]

    sources = [ti_id(h.run_pk, h.source) for h in handoffs]
    after = [
        (source, ti_id(h.run_pk, a)) for source, h in zip(sources, handoffs, strict=True) for a in h.after
    ]
    params = {
        "sources": sources,
        "targets": [ti_id(h.run_pk, h.target) for h in handoffs],
        "controls": [h.control_version for h in handoffs],
        "quiets": [h.quiet for h in handoffs],
        "after_of": [source for source, _ in after],
        "after_ids": [a for _, a in after],
        "token": token,
    }
    rows = (await conn.execute(sql.SET_HANDOFFS, params)).all()
    done = {r.id for r in rows}
    written: dict[int, dict[str, str]] = {}
    for source, h in zip(sources, handoffs, strict=True):
        if source in done:
            written.setdefault(h.run_pk, {})[h.source] = h.target
    return written
