"""Azurite, the Azure Storage emulator (Microsoft's, from npm; ``make install`` puts it in the venv).

Its Blob service listens on 127.0.0.1 on a free port, in memory, with Azurite's well-known
development account; no request leaves loopback. It emulates flat Blob Storage (no hierarchical
namespace): ``pyarrow.fs.AzureFileSystem`` treats folders as prefixes there, as on such accounts.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers.process import free_port, stop, wait_for_http

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's published development account key (not a secret)."""
FLAGS = ("--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--silent")
AZURITE = Path(__file__).resolve().parents[2] / ".venv" / "azurite" / "node_modules" / ".bin" / "azurite-blob"


@dataclass(frozen=True)
class AzureEndpoint:
    authority: str
    container: str = "lake"

    def storage_options(self) -> dict[str, str]:
        """``pyarrow.fs.AzureFileSystem`` keys for this endpoint."""
        return {
            "account_name": ACCOUNT,
            "account_key": KEY,
            "blob_storage_authority": self.authority,
            "dfs_storage_authority": self.authority,
            "blob_storage_scheme": "http",
            "dfs_storage_scheme": "http",
        }

    def uri(self, path: str) -> str:
        return f"abfs://{self.container}@{ACCOUNT}.dfs.core.windows.net/{path}"


@pytest.fixture(scope="session")
def azurite() -> Iterator[AzureEndpoint]:
    """One Azurite Blob endpoint for the session, container ``lake`` created."""
    import pyarrow.fs as pafs

    if not AZURITE.exists():
        raise RuntimeError(f"{AZURITE} is missing: run make install (it installs Azurite with npm)")
    port = free_port()
    proc = subprocess.Popen(
        [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), *FLAGS],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = AzureEndpoint(f"127.0.0.1:{port}")
    try:
        wait_for_http(proc, f"http://{endpoint.authority}/", "Azurite")
        pafs.AzureFileSystem(**endpoint.storage_options()).create_dir(endpoint.container)
        yield endpoint
    finally:
        stop(proc)
