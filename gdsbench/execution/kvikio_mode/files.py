"""How kvikio opens what it reads: a local file with CuFile, an object behind
a URL with RemoteFile (kvikio >= 24.12): open_http for http(s)://, and
open_s3_url for s3:// with the region and endpoint the curl engine and boto3
read (gdsbench.system.object_store), passed as arguments where kvikio takes
them (>= 25.12) and through its environment where it does not. Either handle
answers pread(buffer, size, offset) -> future, and close()."""

from __future__ import annotations

import os

from gdsbench.job.errors import IoFailure, UsageError
from gdsbench.system import object_store
from gdsbench.system.targets import protocol_of


def open_for_reading(kvikio, path: str, write: bool = False):
    """A kvikio handle on path (IoFailure where kvikio cannot open it); for writing, a local file
    opened "r+": never created or truncated (the planner checked it is gdsbench's)."""
    protocol = protocol_of(path)
    try:
        if protocol is None:  # a path on this host
            return kvikio.CuFile(path, "r+" if write else "r")
        remote = getattr(kvikio, "RemoteFile", None)
        if remote is None:
            raise UsageError(f"--mode kvikio {path}: this kvikio has no RemoteFile; kvikio >= 24.12 reads URLs")
        if protocol == "http":
            return remote.open_http(path)
        if protocol != "s3":  # RemoteFile's other openers (WebHDFS, presigned URLs) name no protocol gdsbench reads
            raise UsageError(f"--mode kvikio {path}: kvikio's RemoteFile reads http(s):// and s3:// only; read "
                             f"{protocol}:// with the curl engine (--engine curl, into host memory)")
        aws = {"aws_region_name": object_store.region(), "aws_endpoint_url": object_store.endpoint()}
        try:
            return remote.open_s3_url(path, **{k: v for k, v in aws.items() if v})
        except TypeError:  # kvikio < 25.12 reads them from its environment only, by these names, when it opens
            names = {"AWS_DEFAULT_REGION": aws["aws_region_name"], "AWS_ENDPOINT_URL": aws["aws_endpoint_url"]}
            before = {k: os.environ.get(k) for k in names}
            os.environ.update({k: v for k, v in names.items() if v})
            try:
                return remote.open_s3_url(path)
            finally:
                for k, v in before.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
    except RuntimeError as e:
        raise IoFailure(f"kvikio cannot open {path}: {e}") from None
