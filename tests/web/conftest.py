"""Fixtures of the web UI's browser tests: one schedd cluster with the web service and real tokens
(shared by the package's tests), and a headless Chromium driven through chromedriver.

The browser is Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium`` and
``/usr/bin/chromedriver``, or ``SCHEDD_TEST_CHROMIUM`` and ``SCHEDD_TEST_CHROMEDRIVER``); without
them the tests are skipped, saying so, before any cluster starts. ``.ci/run`` installs them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from schedd.v1 import api_pb2, api_pb2_grpc, resources_pb2 as pb
from schedd_devstack.services import Cluster
from schedd_rpc.tls import token_metadata
from tests.fixtures.services import cluster_on_own_database

RPC_TIMEOUT = 30.0


@dataclass(frozen=True)
class Browser:
    chromium: str
    chromedriver: str


def _found(variable: str, default: str) -> str:
    path = os.environ.get(variable) or shutil.which(default) or ""
    return path if path and os.access(path, os.X_OK) else ""


@pytest.fixture(scope="package")
def browser_binaries() -> Browser:
    chromium = _found("SCHEDD_TEST_CHROMIUM", "chromium")
    chromedriver = _found("SCHEDD_TEST_CHROMEDRIVER", "chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", chromedriver)) if not path]
    if missing:
        pytest.skip(
            f"the browser tests need Chromium and chromedriver; {' and '.join(missing)} not found "
            "(apt-get install chromium chromium-driver, "
            "or set SCHEDD_TEST_CHROMIUM and SCHEDD_TEST_CHROMEDRIVER)"
        )
    return Browser(chromium, chromedriver)


@dataclass
class WebStack:
    cluster: Cluster
    url: str
    admin_token: str
    viewer_token: str
    dags: api_pb2_grpc.DagServiceStub
    runs: api_pb2_grpc.RunServiceStub
    #: where gated tasks look for the files that let them finish
    gates: Path

    def call(self, method: object, request: object) -> object:
        """An api call as the admin."""
        return method(request, timeout=RPC_TIMEOUT, metadata=token_metadata(self.admin_token))  # type: ignore[operator]

    def register(self, spec: Mapping[str, Any]) -> None:
        parsed = json_format.ParseDict(dict(spec), pb.DagSpec())
        self.call(self.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=parsed, unpause=True))

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> pb.DagRun:
        request = api_pb2.CreateRunRequest(parent=f"dags/{dag_id}")
        if conf:
            request.conf.update(conf)
        run = self.call(self.runs.CreateRun, request)
        assert isinstance(run, pb.DagRun)
        return run

    def get_run(self, name: str) -> pb.DagRun:
        run = self.call(self.runs.GetRun, api_pb2.GetRunRequest(name=name))
        assert isinstance(run, pb.DagRun)
        return run


@pytest.fixture(scope="package")
def web_stack(
    browser_binaries: Browser,
    database_url: str,
    etcd_endpoints: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WebStack]:
    log_dir = tmp_path_factory.mktemp("web-cluster")
    with (
        cluster_on_own_database(
            database_url, etcd_endpoints, log_dir, auth=True, web=True, workers=1
        ) as cluster,
        grpc.insecure_channel(cluster.api_address) as channel,
    ):
        tokens = api_pb2_grpc.TokenServiceStub(channel)
        made = tokens.CreateToken(
            api_pb2.CreateTokenRequest(name="web-viewer", role="viewer"),
            timeout=RPC_TIMEOUT,
            metadata=token_metadata(cluster.admin_token),
        )
        gates = tmp_path_factory.mktemp("gates")
        yield WebStack(
            cluster,
            cluster.web_url,
            cluster.admin_token,
            made.secret,
            api_pb2_grpc.DagServiceStub(channel),
            api_pb2_grpc.RunServiceStub(channel),
            gates,
        )


@pytest.fixture(scope="package")
def driver(browser_binaries: Browser) -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = browser_binaries.chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(argument)
    browser = webdriver.Chrome(
        options=options, service=Service(executable_path=browser_binaries.chromedriver)
    )
    browser.set_page_load_timeout(30)
    try:
        yield browser
    finally:
        browser.quit()
