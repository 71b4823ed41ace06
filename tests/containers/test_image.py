"""The schedd image as built: it runs as its non-root user, holds no compiler or build tool, and no
layer of it holds a private key or a token."""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Iterator

import docker
from testcontainers.core.container import DockerContainer

from tests.containers.engine import SCHEDD_IMAGE, Engine

_SECRET = re.compile(
    rb"-----BEGIN (?:RSA |EC |OPENSSH |DSA |ENCRYPTED )?PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{40}"
    rb"|\bsdt_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}"  # a schedd token (schedd_auth.tokens)
    rb"|\bghp_[A-Za-z0-9]{36}\b|\bAKIA[0-9A-Z]{16}\b|\bxox[bp]-[0-9A-Za-z-]{20,}"
)
_SECRET_NAMES = re.compile(r"(^|/)(\.netrc|\.pypirc|\.git-credentials|id_rsa|id_ed25519|\.env|pip\.conf)$")
#: Test data, and shared libraries that embed their self-test keys (GnuTLS's FIPS checks).
_ALLOWED = re.compile(r"/(tests?|test_data|testdata)/|^/usr/lib/[^ ]*\.so(\.[0-9]+)*$")


def _layer_files(image: bytes) -> Iterator[tuple[str, str, bytes]]:
    """(layer, path, content) of every regular file of every layer of a saved image."""
    with tarfile.open(fileobj=io.BytesIO(image)) as saved:
        for member in saved:
            data = saved.extractfile(member) if member.isfile() else None
            if data is None:
                continue
            content = io.BytesIO(data.read())
            if not tarfile.is_tarfile(content):
                continue  # the manifest or the configuration, not a layer
            content.seek(0)
            with tarfile.open(fileobj=content) as layer:
                for file in layer:
                    extracted = layer.extractfile(file) if file.isfile() and file.size < 20_000_000 else None
                    if extracted is not None:
                        yield member.name, file.name, extracted.read()


def test_the_image_runs_as_its_non_root_user_without_build_tools(container_engine: Engine) -> None:
    with DockerContainer(SCHEDD_IMAGE).with_command("sleep 60") as container:
        code, output = container.exec(["id"])
        assert (
            code == 0
            and output.decode().strip() == "uid=10001(schedd) gid=10001(schedd) groups=10001(schedd)"
        )
        code, output = container.exec(
            ["sh", "-c", "for t in gcc cc make g++ clang git; do command -v $t; done"]
        )
        assert output.decode().strip() == "", f"build tools in the image: {output.decode()}"
        code, output = container.exec(["schedd-api", "--help"])
        assert code == 0 and b"Serve the schedd public API" in output


def test_no_layer_holds_a_private_key_or_a_token(container_engine: Engine) -> None:
    client = docker.DockerClient(base_url=container_engine.host)
    image = b"".join(client.images.get(SCHEDD_IMAGE).save())
    found: list[str] = []
    layers = set()
    for layer_name, name, content in _layer_files(image):
        layers.add(layer_name)
        if _ALLOWED.search("/" + name.removeprefix("./")):
            continue
        if _SECRET_NAMES.search(name) or _SECRET.search(content):
            found.append(f"{layer_name}: {name}")
    assert len(layers) >= 3, f"read {len(layers)} layers of the image"
    assert not found, f"secrets in the image's layers: {found}"
