"""Code bundles made in tests: a tar archive of given files, as schedctl uploads one."""

from __future__ import annotations

import io
import tarfile


def bundle_archive(files: dict[str, bytes]) -> bytes:
    """A PAX tar archive of ``files`` (path -> bytes), regular files of mode 0644, sorted by path."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()
