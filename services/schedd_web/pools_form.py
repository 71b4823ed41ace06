"""The pool form of the cluster page (create a pool or change its slots, description and backfill
share) and the cluster's demand figures.

A value that cannot be read (slots that are no whole number, a share outside 0..100 %) is refused at
its field before the api is asked; everything else (the pool's name, limits) is the api's to check,
and its field errors are shown at the field they name. The api's ``SetPool`` has no request id: a
repeated post sets the same values again, which changes nothing more.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import quote

import grpc

from schedd.v1 import api_pb2
from schedd_web.api import Api, ApiError

#: Most slots the form accepts (the api's field is an int32).
MAX_SLOTS = 2**31 - 1
#: The api's field names as the form's.
_FIELD_OF = {"pool": "pool", "slots": "slots", "description": "description", "backfill_share": "share"}


@dataclass(frozen=True)
class PoolForm:
    pool: str
    slots: str
    description: str
    #: the backfill share in percent, as typed; empty keeps the pool's (0.5 for a new pool)
    share: str
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def blank(cls) -> PoolForm:
        return cls(pool="", slots="", description="", share="")

    @classmethod
    def of(cls, pool: api_pb2.Pool) -> PoolForm:
        return cls(pool.pool, str(pool.slots), pool.description, f"{pool.backfill_share * 100:g}")

    @classmethod
    def read(cls, values: Mapping[str, object]) -> PoolForm:
        """The form as typed, with ``errors`` for the values that cannot be read."""
        form = cls(
            pool=str(values.get("pool", "")).strip(),
            slots=str(values.get("slots", "")).strip(),
            description=str(values.get("description", "")),
            share=str(values.get("share", "")).strip(),
        )
        errors: dict[str, str] = {}
        if not form.pool:
            errors["pool"] = "a pool needs a name"
        if not form.slots.isdigit() or int(form.slots) > MAX_SLOTS:
            errors["slots"] = f"must be a whole number of slots (0 or more), not {form.slots!r}"
        if form.share and _percent(form.share) is None:
            errors["share"] = f"must be a percentage from 0 to 100, not {form.share!r}"
        return replace(form, errors=errors)

    @property
    def share_fraction(self) -> float | None:
        return None if not self.share else _percent(self.share)

    def request(self) -> api_pb2.SetPoolRequest:
        """The ``SetPool`` request of a form without errors."""
        request = api_pb2.SetPoolRequest(pool=self.pool, slots=int(self.slots), description=self.description)
        share = self.share_fraction
        if share is not None:
            request.backfill_share = share
        return request


def _percent(text: str) -> float | None:
    """``text`` (``25``, ``12.5``) as a fraction of one, or None when it is no number in 0..100."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value / 100 if 0 <= value <= 100 else None


async def save(api: Api, form: PoolForm, token: str) -> PoolForm | None:
    """``SetPool`` with the form's values: None when saved, the form with the api's words at its
    fields when the api refused a value it named; any other refusal is raised (ApiError)."""
    try:
        await api.call(api.pools.SetPool, form.request(), token)
    except ApiError as exc:
        if exc.code != grpc.StatusCode.INVALID_ARGUMENT:
            raise
        errors = {_FIELD_OF.get(path.split(".")[0], "pool"): problem for path, problem in exc.fields.items()}
        return replace(form, errors=errors or {"pool": exc.message})
    return None


@dataclass(frozen=True)
class Demand:
    """What waits and what runs, summed over the pools and the connected workers."""

    waiting: int
    used: int
    slots: int
    running: int
    capacity: int


def demand(pools: Sequence[api_pb2.Pool], workers: Sequence[api_pb2.Worker]) -> Demand:
    return Demand(
        waiting=sum(p.waiting for p in pools),
        used=sum(p.used for p in pools),
        slots=sum(p.slots for p in pools),
        running=sum(w.running for w in workers),
        capacity=sum(w.capacity for w in workers),
    )


def quoted(value: str) -> str:
    """``value`` as one query value of a URL."""
    return quote(value, safe="")


def new_request_id() -> str:
    return secrets.token_hex(16)
