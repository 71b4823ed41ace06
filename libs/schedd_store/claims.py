"""Claiming queued task instances together with everything their assignments are built from.

:class:`AssignmentClaims` is what ``schedd_exec.assignments.AssignmentBuilder`` claims through (the
registry's dispatcher and the scheduler's local executor give it one): in one transaction it claims
(``schedd_store.dispatch.claim_in``), reads the specs of DAG versions not cached yet and the stored
results of upstream tasks (only for runs that stored any, or from mapped tasks). The claim holds
once that transaction commits; a version whose stored spec cannot be read raises
``UnreadableVersion`` and claims nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schedd_core.claims import ClaimedAttempt, ClaimedWork
from schedd_store import dispatch
from schedd_store.database import Connection, Engine
from schedd_store.versions import VersionCache


class AssignmentClaims:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._versions = VersionCache()

    async def claim(self, *, slots: Sequence[str], queues: Sequence[str]) -> list[ClaimedWork]:
        """Claim queued task instances of ``queues`` for the workers in ``slots`` (a worker id per
        free slot), each with its DAG version's spec, its task's spec and its upstream results."""
        if not slots:
            return []
        async with self._engine.begin() as conn:
            claimed = await dispatch.claim_in(conn, slots=slots, queues=queues)
            return await self._work(conn, claimed)

    async def hand_off(
        self, conn: Connection, claimed: Mapping[int, ClaimedAttempt]
    ) -> dict[int, ClaimedWork]:
        """Inside the transaction ``conn`` that applied some successes and handed off their
        successors (``schedd_store.handoffs``), ``claimed`` by source: the same with what their
        assignments are built from."""
        work = await self._work(conn, list(claimed.values()))
        return {source: w for source, w in zip(claimed, work, strict=True)}

    async def _work(self, conn: Connection, claimed: Sequence[ClaimedAttempt]) -> list[ClaimedWork]:
        """``claimed`` with their specs and upstream results, read in the claiming transaction."""
        if not claimed:
            return []
        await self._versions.load(conn, {c.dag_version_id for c in claimed})
        upstream = {
            up
            for c in claimed
            for up in self._versions.task(c.dag_version_id, c.task_id).upstream
            # a mapped upstream task's results are a list even when none of its instances stored one
            if c.run_has_results or self._versions.task(c.dag_version_id, up).HasField("mapping")
        }
        results = (
            await dispatch.upstream_results(conn, [c.run_pk for c in claimed], sorted(upstream))
            if upstream
            else {}
        )
        work = []
        for c in claimed:
            task = self._versions.task(c.dag_version_id, c.task_id)
            found = {up: results[(c.run_pk, up)] for up in task.upstream if (c.run_pk, up) in results}
            work.append(ClaimedWork(c, self._versions.spec(c.dag_version_id), task, found))
        return work
