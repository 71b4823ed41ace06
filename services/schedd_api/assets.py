"""The api's AssetService: outside asset events, assets with their lineage, and events.

Every input is checked before anything is written: the URI (``schedd_core.assets.normalize_uri``),
the extra (at most 64 KiB of JSON, no NUL) and the request id; a bad one is INVALID_ARGUMENT naming
the field and records nothing. The roles are in ``schedd_auth.roles`` (creating an event needs
operator; reading, viewer).
"""

from __future__ import annotations

import grpc

from schedd.v1 import assets_pb2 as apb, assets_pb2_grpc
from schedd_api.paging import keyset_token, page, page_size
from schedd_core.assets import check_extra, normalize_uri
from schedd_core.errors import InvalidArgument
from schedd_rpc import names
from schedd_rpc.convert import struct, ts
from schedd_store import assets as store, runs
from schedd_store.assets import AssetRecord, EventRecord, NewEvent
from schedd_store.database import Engine

MAX_REQUEST_ID_CHARS = 128


class AssetServicer(assets_pb2_grpc.AssetServiceServicer):
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def CreateAssetEvent(
        self, request: apb.CreateAssetEventRequest, context: grpc.aio.ServicerContext
    ) -> apb.AssetEvent:
        uri = normalize_uri("uri", request.uri)
        extra = check_extra("extra", request.extra)
        if len(request.request_id) > MAX_REQUEST_ID_CHARS or "\x00" in request.request_id:
            raise InvalidArgument("request_id", f"must be at most {MAX_REQUEST_ID_CHARS} characters, no NUL")
        key = f"api:{request.request_id}" if request.request_id else None
        return event_message(await store.create_event(self._engine, NewEvent(uri, extra, key)))

    async def ListAssets(
        self, request: apb.ListAssetsRequest, context: grpc.aio.ServicerContext
    ) -> apb.ListAssetsResponse:
        for name in ("uri_prefix", "page_token"):
            if "\x00" in getattr(request, name):
                raise InvalidArgument(name, "must not contain NUL")
        limit = page_size(request.page_size)
        records = await store.list_assets(
            self._engine, prefix=request.uri_prefix, after=request.page_token, limit=limit + 1
        )
        items, more = page(records, limit, asset_message)
        return apb.ListAssetsResponse(assets=items, next_page_token=items[-1].uri if more else "")

    async def ListAssetEvents(
        self, request: apb.ListAssetEventsRequest, context: grpc.aio.ServicerContext
    ) -> apb.ListAssetEventsResponse:
        uri = normalize_uri("uri", request.uri) if request.uri else ""
        run_pk = None
        if request.consumed_by:
            dag_id, run_id = names.parse_run_name(request.consumed_by, "consumed_by")
            run_pk = (await runs.get_run(self._engine, dag_id, run_id)).pk
        limit = page_size(request.page_size)
        records = await store.list_events(
            self._engine, uri=uri, run_pk=run_pk, before=keyset_token(request.page_token), limit=limit + 1
        )
        items, more = page(records, limit, event_message)
        return apb.ListAssetEventsResponse(events=items, next_page_token=str(items[-1].id) if more else "")


def event_message(record: EventRecord) -> apb.AssetEvent:
    return apb.AssetEvent(
        id=record.id,
        uri=record.uri,
        extra=struct(record.extra),
        source=record.source,
        source_dag_id=record.source_dag_id,
        source_run_id=record.source_run_id,
        source_task_id=record.source_task_id,
        source_watcher=record.source_watcher,
        create_time=ts(record.created_at),
        consumed_by=record.consumed_by,
    )


def asset_message(record: AssetRecord) -> apb.Asset:
    return apb.Asset(
        uri=record.uri,
        name=record.name,
        producers=[apb.TaskRef(dag_id=d, task_id=t) for d, t in record.producers],
        scheduled_dags=record.scheduled_dags,
        readers=[apb.TaskRef(dag_id=d, task_id=t) for d, t in record.readers],
        last_event_time=ts(record.last_event_at),
    )
